import sys

sys.stderr = open(snakemake.log[0], "w")

from aura_eval.vocab import builder_of  # noqa: E402

builder_of(snakemake.params.name)(dict(snakemake.input.items()), snakemake.output.png, snakemake.output.svg)
