import sys

sys.stderr = open(snakemake.log[0], "w")

from aura_eval.construct import release  # noqa: E402

release.construction_tables(snakemake.input[0], snakemake.output)
