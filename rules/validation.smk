rule validation_sample:
    input:
        panel=audit_panel_files(),
        rollouts=expand("results/rollouts/{agent}.jsonl", agent=calibration_agents()),
        dataset=FILES["dataset"],
    output:
        **{axis: f"results/validation/sample_{axis}.jsonl" for axis in AXES},
    log:
        "logs/validation_sample.log",
    params:
        sizes=canonical(config["validation"]["sample_sizes"]),
        annotators=config["validation"]["annotators"],
        annotators_per_sample=config["validation"]["annotators_per_sample"],
    conda:
        "../envs/aura.yaml"
    script:
        "../scripts/validation_sample.py"


rule annotation_pages:
    input:
        **{axis: f"results/validation/sample_{axis}.jsonl" for axis in AXES},
        rubrics=judge_prompt_files(*AXES),
    output:
        expand(
            "results/validation/annotation/{annotator}_{axis}.html",
            annotator=config["validation"]["annotators"],
            axis=AXES,
        ),
    log:
        "logs/annotation_pages.log",
    params:
        annotators=config["validation"]["annotators"],
    conda:
        "../envs/aura.yaml"
    script:
        "../scripts/annotation_pages.py"


rule import_human_labels:
    input:
        samples=[f"results/validation/sample_{axis}.jsonl" for axis in AXES],
        annotations=human_annotation_files(),
        adjudicated=human_adjudication_file(),
    output:
        FILES["human"],
    log:
        "logs/import_human_labels.log",
    conda:
        "../envs/aura.yaml"
    script:
        "../scripts/import_human_labels.py"


rule simulate_annotations:
    input:
        **{axis: f"results/validation/sample_{axis}.jsonl" for axis in AXES},
    output:
        expand("results/validation/simulated/{annotator}.csv", annotator=config["validation"]["annotators"]),
    log:
        "logs/simulate_annotations.log",
    params:
        simulation=canonical(config["llm"].get("simulation", {})),
    conda:
        "../envs/aura.yaml"
    script:
        "../scripts/simulate_annotations.py"
