import sys

sys.stderr = open(snakemake.log[0], "w")

from aura_eval.llm.settings import RESOURCE, with_call_settings  # noqa: E402
from aura_eval.util import table_files  # noqa: E402

rows = table_files.build(snakemake.params.name, dict(snakemake.input.items()), dict(snakemake.output.items()),
                         with_call_settings(snakemake.params.settings, getattr(snakemake.resources, RESOURCE, None)))
print(f"{snakemake.params.name}: {rows}", file=sys.stderr)
