import sys

sys.stderr = open(snakemake.log[0], "w")

from aura_eval.construct import variation  # noqa: E402
from aura_eval.llm import local  # noqa: E402

local.set_threads(snakemake.threads)

counts = variation.run_reviews(snakemake.input.variations, snakemake.input.prefixes, snakemake.output.reviews, snakemake.output.calls, snakemake.config)
print(f"review_variations: {counts}", file=sys.stderr)
