import sys

sys.stderr = open(snakemake.log[0], "w")

from aura_eval.evaluate import judging  # noqa: E402
from aura_eval.llm.ratelimit import job_llm  # noqa: E402

counts = judging.judge_safety(snakemake.input.dataset, snakemake.input.rollouts,
                            dict(zip(snakemake.params.judges, snakemake.input.phase1)), snakemake.output.judgments,
                            snakemake.output.calls, job_llm(snakemake), snakemake.wildcards.run,
                            snakemake.params.judge_model, snakemake.threads)
print(f"judge_safety: {counts}", file=sys.stderr)
