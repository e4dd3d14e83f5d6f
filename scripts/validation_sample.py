import sys

sys.stderr = open(snakemake.log[0], "w")

from aura_eval.evaluate import validation  # noqa: E402

counts = validation.validation_sample(snakemake.input.panel, snakemake.input.rollouts, snakemake.input.dataset,
                               snakemake.params.sizes, {axis: snakemake.output[axis] for axis in validation.AXIS_LABELS},
                               snakemake.params.annotators, snakemake.params.annotators_per_sample)
print(f"validation_sample: {counts}", file=sys.stderr)
