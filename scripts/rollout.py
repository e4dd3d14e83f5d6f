import sys

sys.stderr = open(snakemake.log[0], "w")

from aura_eval import rollout  # noqa: E402
from aura_eval.llm import local  # noqa: E402

local.set_threads(snakemake.threads)

rollout.run(snakemake.input.dataset, snakemake.input.subset, snakemake.output.rollouts, snakemake.output.calls,
            snakemake.config, snakemake.wildcards.run)
