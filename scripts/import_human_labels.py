import sys

sys.stderr = open(snakemake.log[0], "w")

from aura_eval.evaluate import validation  # noqa: E402
from aura_eval.util.jsonl import InputError  # noqa: E402

try:
    rows = validation.import_human_labels(snakemake.input.samples, snakemake.input.annotations,
                                 snakemake.input.adjudicated[0] if snakemake.input.adjudicated else None,
                                 snakemake.output[0])
except InputError as err:
    sys.exit(f"import_human_labels: {err}")
print(f"import_human_labels: {len(rows)} samples, {sum(r['retained'] for r in rows)} with a final label",
      file=sys.stderr)
