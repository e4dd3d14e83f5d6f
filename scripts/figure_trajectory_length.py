import sys

sys.stderr = open(snakemake.log[0], "w")

from aura_eval import figures  # noqa: E402
from aura_eval.jsonl import read_jsonl  # noqa: E402

figures.trajectory_length_by_domain(read_jsonl(snakemake.input[0]), snakemake.output.png, snakemake.output.svg)
