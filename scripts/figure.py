import sys

sys.stderr = open(snakemake.log[0], "w")

from aura_eval.artefact_registry import builder_of  # noqa: E402

# A figure's outputs beyond PNG and SVG (a sidecar) and its config values, where its registry entry has them.
extra = {fmt: path for fmt, path in snakemake.output.items() if fmt not in ("png", "svg")}
if "settings" in snakemake.params.keys():
    extra["settings"] = snakemake.params.settings
builder_of(snakemake.params.name)(dict(snakemake.input.items()), snakemake.output.png, snakemake.output.svg, **extra)
