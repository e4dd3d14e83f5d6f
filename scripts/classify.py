import sys

sys.stderr = open(snakemake.log[0], "w")

from aura_eval.construct import pairing  # noqa: E402
from aura_eval.llm.ratelimit import job_llm  # noqa: E402

counts = pairing.classify(snakemake.input.prefixes, snakemake.input.variations, snakemake.input.reviews,
                                    snakemake.output.pool, snakemake.output.calls, job_llm(snakemake),
                                    snakemake.params.models, snakemake.threads)
print(f"classify: {counts}", file=sys.stderr)
