# Until the construction stage lands, the original prefixes stand in as evaluation items.
rule stand_in_dataset:
    input:
        "results/prefixes/prefixes.jsonl",
    output:
        "results/dataset/aura_eval.jsonl",
    log:
        "logs/stand_in_dataset.log",
    conda:
        "../envs/aura.yaml"
    script:
        "../scripts/stand_in_dataset.py"


rule action_only_subset:
    input:
        "results/dataset/aura_eval.jsonl",
    output:
        "results/dataset/action_only_subset.jsonl",
    log:
        "logs/action_only_subset.log",
    params:
        n_items=config["action_only"]["n_items"],
    conda:
        "../envs/aura.yaml"
    script:
        "../scripts/action_only_subset.py"
