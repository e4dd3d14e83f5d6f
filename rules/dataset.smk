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


# The release's description, once its three files exist: the Hugging Face card (README.md) and the
# Croissant metadata, both with the counts and sha256 of all three.
rule dataset_card:
    input:
        dataset=FILES["dataset"],
        subset=FILES["subset"],
        excluded=FILES["excluded"],
        funnel=FILES["funnel"],
    output:
        card=FILES["card"],
        croissant=FILES["croissant"],
    log:
        "logs/dataset_card.log",
    params:
        roles=canonical({role: config["roles"][role] for role in CONSTRUCTION_ROLES}),
        models=canonical({name: config["models"][name]["model"] for role in CONSTRUCTION_ROLES
                          for name in jobs.as_list(config["roles"][role])}),
    conda:
        "../envs/aura.yaml"
    script:
        "../scripts/dataset_card.py"
