import sys

sys.stderr = open(snakemake.log[0], "w")

from aura_eval.construct import card  # noqa: E402

sizes = card.dataset_card(snakemake.input, snakemake.output, snakemake.params.roles, snakemake.params.models)
print(f"dataset_card: {sizes}", file=sys.stderr)
