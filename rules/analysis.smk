rule analysis_frame:
    input:
        labels=label_files(),
        dataset=FILES["dataset"],
    output:
        FILES["frame"],
    log:
        "logs/analysis_frame.log",
    params:
        agents=canonical(config["agents"]),
    conda:
        "../envs/aura.yaml"
    script:
        "../scripts/analysis_frame.py"


# One rule per table and per figure of the registries (aura_eval/vocab.py), named after it,
# each reading only the inputs its entry names, so redrawing one never recomputes another.
for table in TABLES.values():

    rule:
        name:
            table.name
        input:
            **artefact_inputs(table),
        output:
            **shown_in_report(table, "table"),
        resources:
            **table_resources(table),
        log:
            f"logs/tables/{table.name}.log",
        params:
            name=table.name,
            settings=config_values(table.config),
            caption=table.caption,
        conda:
            "../envs/aura.yaml"
        script:
            "../scripts/table.py"


for figure in FIGURES.values():

    rule:
        name:
            figure.name
        input:
            **artefact_inputs(figure),
        output:
            **shown_in_report(figure, "figure"),
        log:
            f"logs/figures/{figure.name}.log",
        params:
            name=figure.name,
            caption=figure.caption,
        conda:
            "../envs/aura.yaml"
        script:
            "../scripts/figure.py"
