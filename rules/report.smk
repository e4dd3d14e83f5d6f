rule figure_trajectory_length:
    input:
        "results/seeds/seeds.jsonl",
    output:
        png="results/figures/trajectory_length_by_domain.png",
        svg="results/figures/trajectory_length_by_domain.svg",
    log:
        "logs/figure_trajectory_length.log",
    conda:
        "../envs/aura.yaml"
    script:
        "../scripts/figure_trajectory_length.py"


rule tables_spine:
    input:
        seeds="results/seeds/seeds.jsonl",
        tags="results/prefixes/tags.jsonl",
        prefixes="results/prefixes/prefixes.jsonl",
        calls=call_logs(),
    output:
        composition="results/tables/seed_composition.csv",
        prefixes="results/tables/prefix_counts.csv",
        calls="results/tables/model_calls.csv",
        summary="results/tables/run_summary.md",
    log:
        "logs/tables_spine.log",
    params:
        seeds=config["seeds"],
        models=config["models"],
        roles=config["roles"],
        agents=config["agents"],
    conda:
        "../envs/aura.yaml"
    script:
        "../scripts/tables_spine.py"


rule tables_evaluation:
    input:
        labels=label_files(),
        five_judge=reliability_files("five_judge"),
        repeats=reliability_files("repeats"),
    output:
        summary="results/tables/evaluation_summary.csv",
        five_judge="results/tables/five_judge_panel.csv",
        consistency="results/tables/judge_consistency.csv",
    log:
        "logs/tables_evaluation.log",
    params:
        agents=config["agents"],
    conda:
        "../envs/aura.yaml"
    script:
        "../scripts/tables_evaluation.py"


rule report:
    input:
        source="paper/report.qmd",
        tables=rules.tables_spine.output,
        evaluation=rules.tables_evaluation.output,
        construction=rules.tables_construction.output,
        card="results/dataset/README.md",
        analysis_tables=expand("results/tables/{table}.csv", table=ANALYSIS_TABLES),
        analysis_figures=expand("results/figures/{figure}.png", figure=ANALYSIS_FIGURES),
        figures=rules.figure_trajectory_length.output,
    output:
        "results/report/report.html",
    log:
        "logs/report.log",
    conda:
        "../envs/aura.yaml"
    script:
        "../scripts/render_report.py"
