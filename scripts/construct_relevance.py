import sys

sys.stderr = open(snakemake.log[0], "w")

from aura_eval.construct import variation  # noqa: E402
from aura_eval.llm import local  # noqa: E402

local.set_threads(snakemake.threads)

counts = variation.run_relevance(snakemake.input.prefixes, snakemake.output.relevance, snakemake.output.candidates, snakemake.output.calls, snakemake.config)
print(f"relevance: {counts}", file=sys.stderr)
