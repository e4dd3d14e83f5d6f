# AURA-Eval: from raw R-Judge records to the report. See README.md and ../shared design notes.
from snakemake.utils import min_version

min_version("9.0")


# The default config only when none is given: `--configfile config/paper.yaml` replaces it
# instead of being merged into it (a merge would keep the default's models and agents).
if not config:

    configfile: "config/config.yaml"


include: "rules/common.smk"
include: "rules/seeds.smk"
include: "rules/prefixes.smk"
include: "rules/construct.smk"
include: "rules/dataset.smk"
include: "rules/evaluate.smk"
include: "rules/reliability.smk"
include: "rules/validation.smk"
include: "rules/analysis.smk"
include: "rules/report.smk"


rule all:
    input:
        get_final_output(),
    default_target: True
