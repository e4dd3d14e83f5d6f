import sys

sys.stderr = open(snakemake.log[0], "w")

from aura_eval import tagging  # noqa: E402
from aura_eval.llm import local  # noqa: E402

local.set_threads(snakemake.threads)

tagging.run(snakemake.input.seeds, snakemake.output.tags, snakemake.output.calls, snakemake.config)
