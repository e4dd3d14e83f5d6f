rule analysis_frame:
    input:
        labels=label_files(),
        dataset="results/dataset/aura_eval.jsonl",
    output:
        "results/analysis/labels_long.csv",
    log:
        "logs/analysis_frame.log",
    params:
        agents=config["agents"],
    conda:
        "../envs/aura.yaml"
    script:
        "../scripts/analysis_frame.py"


rule table:
    input:
        frame="results/analysis/labels_long.csv",
        dataset="results/dataset/aura_eval.jsonl",
        subset="results/dataset/action_only_subset.jsonl",
        prefixes="results/prefixes/prefixes.jsonl",
        five_judge=reliability_files("five_judge"),
        vendor_swap=reliability_files("vendor_swap"),
        human="results/validation/human_labels.jsonl",
    output:
        csv="results/tables/{table}.csv",
        md="results/tables/{table}.md",
    log:
        "logs/tables/{table}.log",
    wildcard_constraints:
        table="|".join(ANALYSIS_TABLES),
    conda:
        "../envs/aura.yaml"
    script:
        "../scripts/analysis_table.py"


rule figure:
    input:
        "results/analysis/labels_long.csv",
    output:
        png="results/figures/{figure}.png",
        svg="results/figures/{figure}.svg",
    log:
        "logs/figures/{figure}.log",
    wildcard_constraints:
        figure="|".join(ANALYSIS_FIGURES),
    conda:
        "../envs/aura.yaml"
    script:
        "../scripts/analysis_figure.py"
