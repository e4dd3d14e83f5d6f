import sys

sys.stderr = open(snakemake.log[0], "w")

from aura_eval import tagging  # noqa: E402
from aura_eval.jsonl import InputError  # noqa: E402

try:
    prefixes = tagging.run_truncate(snakemake.input.seeds, snakemake.input.tags, snakemake.output[0])
except InputError as err:
    sys.exit(f"truncate_prefixes: {err}")
print(f"truncate_prefixes: {len(prefixes)} prefixes", file=sys.stderr)
