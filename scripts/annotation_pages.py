import sys
from pathlib import Path

sys.stderr = open(snakemake.log[0], "w")

from aura_eval.evaluate import validation  # noqa: E402

pages = validation.annotation_pages({axis: snakemake.input[axis] for axis in validation.AXIS_LABELS},
                             snakemake.params.annotators, Path(snakemake.output[0]).parent)
print(f"annotation_pages: {len(pages)} pages", file=sys.stderr)
