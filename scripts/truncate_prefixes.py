import sys

sys.stderr = open(snakemake.log[0], "w")

from aura_eval.construct import tagging  # noqa: E402
from aura_eval.util.jsonl import InputError  # noqa: E402

try:
    prefixes = tagging.truncate_prefixes(snakemake.input.seeds, snakemake.input.tags, snakemake.output[0])
except InputError as err:
    sys.exit(f"truncate_prefixes: {err}")
print(f"truncate_prefixes: {len(prefixes)} prefixes", file=sys.stderr)
