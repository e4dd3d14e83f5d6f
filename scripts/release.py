import sys

sys.stderr = open(snakemake.log[0], "w")

from aura_eval.construct import release  # noqa: E402

counts = release.release(snakemake.input, snakemake.output, snakemake.params.settings)
print(f"release: {counts}", file=sys.stderr)
