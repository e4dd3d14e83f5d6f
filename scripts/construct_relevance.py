import sys

sys.stderr = open(snakemake.log[0], "w")

from aura_eval.construct import variation  # noqa: E402

counts = variation.run_relevance(snakemake.input.prefixes, snakemake.output.relevance, snakemake.output.candidates,
                                 snakemake.output.calls, snakemake.params.llm, snakemake.params.models,
                                 snakemake.params.max_per_prefix, snakemake.threads)
print(f"relevance: {counts}", file=sys.stderr)
