import sys

sys.stderr = open(snakemake.log[0], "w")

from aura_eval import judging  # noqa: E402
from aura_eval.llm import local  # noqa: E402

local.set_threads(snakemake.threads)

judging.run_phase1(snakemake.input.dataset, snakemake.input.rollouts, snakemake.output.judgments,
                   snakemake.output.calls, snakemake.config, snakemake.wildcards.run, snakemake.wildcards.judge)
