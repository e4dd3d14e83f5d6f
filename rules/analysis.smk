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


# Under a cluster executor the tables and figures (jobs of seconds each) are submitted together as
# jobs of this group: the profile's group-components says how many of them one submission holds,
# and its `resources: artefact_slots=N` (a local-scoped resource that only these rules take,
# artefact_resources()) how many run at once inside it, which bounds the submission's cores and
# memory to N jobs' worth (profiles/slurm). Local runs ignore groups and the slot; the audit site
# and the report stay out, so that the tables are split among parallel submissions.
ARTEFACT_GROUP = "artefacts"


# One rule per table and per figure of the registry (aura_eval/artefact_registry.py), named after it,
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
            **artefact_resources(),
        group:
            ARTEFACT_GROUP
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
        resources:
            **artefact_resources(),
        group:
            ARTEFACT_GROUP
        log:
            f"logs/figures/{figure.name}.log",
        params:
            name=figure.name,
            caption=figure.caption,
            # only a figure whose entry names config keys gets them (scripts/figure.py passes them on)
            **({"settings": config_values(figure.config)} if figure.config else {}),
        conda:
            "../envs/aura.yaml"
        script:
            "../scripts/figure.py"
