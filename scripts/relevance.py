import sys

sys.stderr = open(snakemake.log[0], "w")

from aura_eval.construct import variation  # noqa: E402
from aura_eval.llm.ratelimit import job_llm  # noqa: E402

counts = variation.relevance(snakemake.input.prefixes, snakemake.output.relevance, snakemake.output.candidates,
                                 snakemake.output.calls, job_llm(snakemake), snakemake.params.models,
                                 snakemake.params.max_per_prefix, snakemake.threads)
print(f"relevance: {counts}", file=sys.stderr)
