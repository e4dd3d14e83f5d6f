import sys
from pathlib import Path

sys.stderr = open(snakemake.log[0], "w")

from aura_eval.construct import seeds  # noqa: E402
from aura_eval.util.jsonl import InputError  # noqa: E402

try:
    chosen = seeds.select_seeds(Path(snakemake.input[0]).parents[1], snakemake.params.seeds, snakemake.output[0])
except InputError as err:
    sys.exit(f"select_seeds: {err}")
print(f"select_seeds: {len(chosen)} seeds (setting: {snakemake.params.seeds})", file=sys.stderr)
