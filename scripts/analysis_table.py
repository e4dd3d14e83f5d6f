import sys

sys.stderr = open(snakemake.log[0], "w")

from aura_eval import analysis, report  # noqa: E402

table = analysis.build_table(snakemake.params.table, snakemake.input)
report.write_table(table, snakemake.output.csv, snakemake.output.md)
print(f"{snakemake.params.table}: {len(table)} rows", file=sys.stderr)
