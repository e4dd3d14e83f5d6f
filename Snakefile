# AURA-Eval: from raw R-Judge records to the report. See README.md and ../shared design notes.
from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


include: "rules/common.smk"
include: "rules/seeds.smk"
include: "rules/prefixes.smk"
include: "rules/report.smk"


rule all:
    input:
        get_final_output(),
    default_target: True
