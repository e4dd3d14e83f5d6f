import sys

sys.stderr = open(snakemake.log[0], "w")

from aura_eval.construct import pairing  # noqa: E402

counts = pairing.run_pair_reviews(snakemake.input.pairs, snakemake.input.pool, snakemake.output.reviews,
                                  snakemake.output.calls, snakemake.params.llm, snakemake.params.models,
                                  snakemake.threads)
print(f"review_pairs: {counts}", file=sys.stderr)
