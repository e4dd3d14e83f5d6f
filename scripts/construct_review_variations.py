import sys

sys.stderr = open(snakemake.log[0], "w")

from aura_eval.construct import variation  # noqa: E402

counts = variation.run_reviews(snakemake.input.variations, snakemake.input.prefixes, snakemake.output.reviews,
                               snakemake.output.calls, snakemake.params.llm, snakemake.params.models,
                               snakemake.threads)
print(f"review_variations: {counts}", file=sys.stderr)
