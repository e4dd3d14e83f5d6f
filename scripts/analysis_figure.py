import sys

sys.stderr = open(snakemake.log[0], "w")

from aura_eval import analysis, figures  # noqa: E402

figures.FIGURES[snakemake.params.figure](analysis.read_frame(snakemake.input[0]), snakemake.output.png,
                                            snakemake.output.svg)
