import sys

sys.stderr = open(snakemake.log[0], "w")

from aura_eval.construct import variation  # noqa: E402
from aura_eval.llm.ratelimit import job_llm  # noqa: E402

counts = variation.review_variations(snakemake.input.variations, snakemake.input.prefixes, snakemake.output.reviews,
                               snakemake.output.calls, job_llm(snakemake), snakemake.params.models,
                               snakemake.threads)
print(f"review_variations: {counts}", file=sys.stderr)
