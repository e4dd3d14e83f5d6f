import sys

sys.stderr = open(snakemake.log[0], "w")

from aura_eval import render  # noqa: E402

engine = render.render_report(snakemake.input.source, snakemake.input.files, snakemake.output[0],
                              snakemake.params.simulated, snakemake.input.reference,
                              snakemake.input.deviations)
print(f"report rendered with {engine}", file=sys.stderr)
