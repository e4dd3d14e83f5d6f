rule tag_steps:
    input:
        seeds="results/seeds/seeds.jsonl",
        prompt="prompts/p1_step_tagging.yaml",
    output:
        tags="results/prefixes/tags.jsonl",
        calls="results/calls/tag_steps.jsonl",
    threads: model_threads()
    log:
        "logs/tag_steps.log",
    params:
        models=role_models("tagger"),
    conda:
        "../envs/aura.yaml"
    script:
        "../scripts/tag_steps.py"


rule truncate_prefixes:
    input:
        seeds="results/seeds/seeds.jsonl",
        tags="results/prefixes/tags.jsonl",
    output:
        "results/prefixes/prefixes.jsonl",
    log:
        "logs/truncate_prefixes.log",
    conda:
        "../envs/aura.yaml"
    script:
        "../scripts/truncate_prefixes.py"
