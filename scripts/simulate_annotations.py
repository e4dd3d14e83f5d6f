import sys

sys.stderr = open(snakemake.log[0], "w")

from aura_eval.evaluate import validation  # noqa: E402

counts = validation.simulate_annotations([snakemake.input[axis] for axis in ("detection", "action_type",
                                                                                   "action_safety")],
                                              snakemake.output, snakemake.params.simulation)
print(f"simulate_annotations (SIMULATED annotators): {counts}", file=sys.stderr)
