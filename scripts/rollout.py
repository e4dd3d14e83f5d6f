import sys

sys.stderr = open(snakemake.log[0], "w")

from aura_eval.evaluate import rollout  # noqa: E402
from aura_eval.llm.ratelimit import job_llm  # noqa: E402

if snakemake.input.inspect_log:  # an agent given by an inspect log: read, no model call
    from aura_eval.evaluate.inspect_log import rollout_from_log

    counts = rollout_from_log(snakemake.input.items_file, snakemake.input.inspect_log[0], snakemake.output.rollouts,
                              snakemake.output.calls, snakemake.wildcards.run)
else:
    counts = rollout.rollout(snakemake.input.items_file, snakemake.output.rollouts, snakemake.output.calls,
                             job_llm(snakemake), snakemake.wildcards.run, snakemake.params.output,
                             snakemake.params.model, snakemake.threads, agent_entry=snakemake.params.agent)
print(f"rollout {snakemake.wildcards.run}: {counts}", file=sys.stderr)
