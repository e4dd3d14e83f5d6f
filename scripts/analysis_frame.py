import sys

sys.stderr = open(snakemake.log[0], "w")

from aura_eval.analyze import frame  # noqa: E402

frame.analysis_frame(snakemake.input.labels, snakemake.input.dataset, snakemake.params.agents, snakemake.output[0])
