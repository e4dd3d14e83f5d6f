import sys

sys.stderr = open(snakemake.log[0], "w")

from aura_eval.construct import pairing  # noqa: E402
from aura_eval.llm import local  # noqa: E402

local.set_threads(snakemake.threads)

counts = pairing.run_classification(snakemake.input.prefixes, snakemake.input.variations, snakemake.input.reviews, snakemake.output.pool, snakemake.output.calls, snakemake.config)
print(f"classify: {counts}", file=sys.stderr)
