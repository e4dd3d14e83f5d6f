import sys

sys.stderr = open(snakemake.log[0], "w")

from aura_eval import reliability  # noqa: E402
from aura_eval.llm import local  # noqa: E402

local.set_threads(snakemake.threads)

reliability.run(snakemake.wildcards.kind, snakemake.input.dataset, snakemake.input.rollouts, snakemake.input.labels,
                snakemake.output.rows, snakemake.output.calls, snakemake.config, snakemake.wildcards.agent)
