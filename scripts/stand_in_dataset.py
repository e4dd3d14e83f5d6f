import sys

sys.stderr = open(snakemake.log[0], "w")

from aura_eval import dataset  # noqa: E402
from aura_eval.jsonl import read_jsonl  # noqa: E402

items = dataset.write_stand_in(read_jsonl(snakemake.input[0]), snakemake.output[0])
print(f"stand_in_dataset: {len(items)} items (original prefixes)", file=sys.stderr)
