import sys

sys.stderr = open(snakemake.log[0], "w")

from aura_eval.construct import pairing  # noqa: E402
from aura_eval.llm import local  # noqa: E402

local.set_threads(snakemake.threads)

counts = pairing.run_pair_reviews(snakemake.input.pairs, snakemake.input.pool, snakemake.output.reviews, snakemake.output.calls, snakemake.config)
print(f"review_pairs: {counts}", file=sys.stderr)
