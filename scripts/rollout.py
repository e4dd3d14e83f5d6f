import sys

sys.stderr = open(snakemake.log[0], "w")

from aura_eval.evaluate import rollout  # noqa: E402
from aura_eval.llm.ratelimit import job_llm  # noqa: E402

counts = rollout.rollout(snakemake.input.items_file, snakemake.output.rollouts, snakemake.output.calls, job_llm(snakemake),
                     snakemake.wildcards.run, snakemake.params.output, snakemake.params.model, snakemake.threads,
                     agent_entry=snakemake.params.agent)
print(f"rollout {snakemake.wildcards.run}: {counts}", file=sys.stderr)
