import sys

sys.stderr = open(snakemake.log[0], "w")

from aura_eval.construct import pairing  # noqa: E402
from aura_eval.llm import local  # noqa: E402

local.set_threads(snakemake.threads)

counts = pairing.run_pair_generation(snakemake.input.pool, snakemake.input.seeds, snakemake.output.pairs, snakemake.output.calls, snakemake.config)
print(f"generate_pairs: {counts}", file=sys.stderr)
