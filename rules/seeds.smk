rule select_seeds:
    input:
        rjudge_files(),
    output:
        FILES["seeds"],
    log:
        "logs/select_seeds.log",
    params:
        seeds=config["seeds"],
    conda:
        "../envs/aura.yaml"
    script:
        "../scripts/select_seeds.py"
