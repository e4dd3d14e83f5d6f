import sys

sys.stderr = open(snakemake.log[0], "w")

from aura_eval import analysis  # noqa: E402

analysis.run_frame(snakemake.input.labels, snakemake.input.dataset, snakemake.params.agents, snakemake.output[0])
