import sys

sys.stderr = open(snakemake.log[0], "w")

from aura_eval.construct import pairing  # noqa: E402

counts = pairing.run_classification(snakemake.input.prefixes, snakemake.input.variations, snakemake.input.reviews,
                                    snakemake.output.pool, snakemake.output.calls, snakemake.params.llm,
                                    snakemake.params.models, snakemake.threads)
print(f"classify: {counts}", file=sys.stderr)
