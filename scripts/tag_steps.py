import sys

sys.stderr = open(snakemake.log[0], "w")

from aura_eval import tagging  # noqa: E402

counts = tagging.run(snakemake.input.seeds, snakemake.output.tags, snakemake.output.calls, snakemake.params.llm,
                     snakemake.params.models, snakemake.threads)
print(f"tag_steps: {counts}", file=sys.stderr)
