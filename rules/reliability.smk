rule reliability:
    input:
        dataset=FILES["dataset"],
        rollouts="results/rollouts/{agent}.jsonl",
        labels=reliability_labels,
        prompts=stage_prompts("reliability"),
    output:
        rows="results/reliability/{kind}/{agent}.jsonl",
        calls=CALL_LOGS["reliability"],
    threads: model_threads(reliability_models)
    resources:
        **model_resources(reliability_models, reliability_jobs),
    log:
        "logs/reliability/{kind}/{agent}.log",
    wildcard_constraints:
        kind="|".join(RELIABILITY_KINDS),
    params:
        llm=llm_settings(),
        settings=reliability_settings,
    conda:
        "../envs/aura.yaml"
    script:
        "../scripts/reliability.py"
