import sys

sys.stderr = open(snakemake.log[0], "w")

from aura_eval.evaluate import judging  # noqa: E402

counts = judging.labels(snakemake.input.rollouts, dict(zip(snakemake.params.judges, snakemake.input.judgments)),
                            snakemake.output[0])
print(f"labels: {counts}", file=sys.stderr)
