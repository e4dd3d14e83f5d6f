import sys

sys.stderr = open(snakemake.log[0], "w")

from aura_eval.construct import tagging  # noqa: E402
from aura_eval.llm.ratelimit import job_llm  # noqa: E402

counts = tagging.tag_steps(snakemake.input.seeds, snakemake.output.tags, snakemake.output.calls, job_llm(snakemake),
                     snakemake.params.models, snakemake.threads)
print(f"tag_steps: {counts}", file=sys.stderr)
