import sys

sys.stderr = open(snakemake.log[0], "w")

from aura_eval import report  # noqa: E402

report.evaluation_tables(snakemake.input, snakemake.output, snakemake.params)
