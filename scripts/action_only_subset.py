import sys

sys.stderr = open(snakemake.log[0], "w")

from aura_eval.evaluate import action_only as dataset  # noqa: E402

rows = dataset.action_only_subset(snakemake.input[0], snakemake.output[0], snakemake.params.n_items)
print(f"action_only_subset: {len(rows)} items", file=sys.stderr)
