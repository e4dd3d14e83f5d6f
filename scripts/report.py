import os
import sys

sys.stderr = open(snakemake.log[0], "w")

from aura_eval.report import render  # noqa: E402

configfiles = [p for p in os.environ.get("AURA_CONFIGFILES", "").split(os.pathsep) if p]  # rules/report.smk
engine = render.report(snakemake.input.source, snakemake.input.files, f"{snakemake.output[0]}/report.html",
                              snakemake.params.simulated, dict(snakemake.params.sources), configfiles,
                              snakemake.input.reference, snakemake.input.deviations)
print(f"report rendered with {engine}", file=sys.stderr)
