import sys

sys.stderr = open(snakemake.log[0], "w")

from aura_eval.construct import pairing  # noqa: E402
from aura_eval.llm.ratelimit import job_llm  # noqa: E402

counts = pairing.generate_pairs(snakemake.input.pool, snakemake.input.seeds, snakemake.output.pairs,
                                     snakemake.output.calls, job_llm(snakemake), snakemake.params.models,
                                     snakemake.threads)
print(f"generate_pairs: {counts}", file=sys.stderr)
