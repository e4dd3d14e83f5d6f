import sys

sys.stderr = open(snakemake.log[0], "w")

from aura_eval import tagging  # noqa: E402

tagging.run(snakemake.input.seeds, snakemake.output.tags, snakemake.output.calls, snakemake.config)
