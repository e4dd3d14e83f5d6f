import sys

sys.stderr = open(snakemake.log[0], "w")

from aura_eval.report import audit  # noqa: E402

LISTS = ("rollouts", "judgments", "labels", "calls", "cells")
inputs = {name: list(snakemake.input[name]) if name in LISTS else snakemake.input[name]
          for name in ("seeds", "tags", "prefixes", "variations", "reviews", "pool", "pairs", "pair_reviews",
                       "dataset", "excluded", "frame", "running_example", "running_example_shown", *LISTS)}
counts = audit.audit_site(inputs, f"{snakemake.output.site}/index.html")
print(f"audit_site: {counts['items']} items, {counts['excluded']} excluded candidates, {counts['runs']} runs, "
      f"{counts['pages']} pages, cell lists of {counts['tables']} tables", file=sys.stderr)
