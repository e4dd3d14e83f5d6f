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


# One rule per table and per figure (named after its file), each a job of its own,
# so redrawing one never recomputes another.
for table_name in ANALYSIS_TABLES:

    rule:
        name:
            table_name
        input:
            frame="results/analysis/labels_long.csv",
            dataset="results/dataset/aura_eval.jsonl",
            subset="results/dataset/action_only_subset.jsonl",
            five_judge=reliability_files("five_judge"),
            vendor_swap=reliability_files("vendor_swap"),
            human="results/validation/human_labels.jsonl",
        output:
            csv=f"results/tables/{table_name}.csv",
            md=f"results/tables/{table_name}.md",
        log:
            f"logs/tables/{table_name}.log",
        params:
            table=table_name,
        conda:
            "../envs/aura.yaml"
        script:
            "../scripts/analysis_table.py"


for figure_name in ANALYSIS_FIGURES:

    rule:
        name:
            figure_name
        input:
            "results/analysis/labels_long.csv",
        output:
            png=f"results/figures/{figure_name}.png",
            svg=f"results/figures/{figure_name}.svg",
        log:
            f"logs/figures/{figure_name}.log",
        params:
            figure=figure_name,
        conda:
            "../envs/aura.yaml"
        script:
            "../scripts/analysis_figure.py"
