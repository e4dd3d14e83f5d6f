import sys

sys.stderr = open(snakemake.log[0], "w")

from aura_eval.construct import variation  # noqa: E402
from aura_eval.llm.ratelimit import job_llm  # noqa: E402

counts = variation.vary(snakemake.input.candidates, snakemake.input.prefixes, snakemake.output.variations,
                                  snakemake.output.calls, job_llm(snakemake), snakemake.params.models,
                                  snakemake.threads)
print(f"vary: {counts}", file=sys.stderr)
