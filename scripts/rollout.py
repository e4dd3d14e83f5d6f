import sys

sys.stderr = open(snakemake.log[0], "w")

from aura_eval import rollout  # noqa: E402

counts = rollout.run(snakemake.input.items_file, snakemake.output.rollouts, snakemake.output.calls, snakemake.params.llm,
                     snakemake.wildcards.run, snakemake.params.output, snakemake.params.model, snakemake.threads,
                     agent_entry=snakemake.params.agent)
print(f"rollout {snakemake.wildcards.run}: {counts}", file=sys.stderr)
