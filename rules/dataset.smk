rule action_only_subset:
    input:
        FILES["dataset"],
    output:
        FILES["subset"],
    log:
        "logs/action_only_subset.log",
    params:
        n_items=config["action_only"]["n_items"],
    conda:
        "../envs/aura.yaml"
    script:
        "../scripts/action_only_subset.py"
