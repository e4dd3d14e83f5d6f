import sys

sys.stderr = open(snakemake.log[0], "w")

from aura_eval.evaluate import reliability  # noqa: E402
from aura_eval.llm.ratelimit import job_llm  # noqa: E402

counts = reliability.reliability(snakemake.wildcards.kind, snakemake.input.dataset, snakemake.input.rollouts,
                         snakemake.input.labels, snakemake.output.rows, snakemake.output.calls, job_llm(snakemake),
                         snakemake.params.settings, snakemake.wildcards.agent, snakemake.threads)
print(f"reliability {snakemake.wildcards.kind} for {snakemake.wildcards.agent}: {counts}", file=sys.stderr)
