rule tag_steps:
    input:
        seeds=FILES["seeds"],
        prompts=stage_prompts("tag_steps"),
    output:
        tags=FILES["tags"],
        calls=CALL_LOGS["tag_steps"],
    threads: model_threads(role_models("tagger"))
    resources:
        **model_resources(role_models("tagger")),
    log:
        "logs/tag_steps.log",
    params:
        llm=llm_settings(),
        models=role_models("tagger"),
    conda:
        "../envs/aura.yaml"
    script:
        "../scripts/tag_steps.py"


rule truncate_prefixes:
    input:
        seeds=FILES["seeds"],
        tags=FILES["tags"],
    output:
        FILES["prefixes"],
    log:
        "logs/truncate_prefixes.log",
    conda:
        "../envs/aura.yaml"
    script:
        "../scripts/truncate_prefixes.py"
