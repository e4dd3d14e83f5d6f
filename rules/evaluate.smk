rule rollout:
    input:
        items_file=run_items,
        prompt=run_prompt,
        inspect_log=run_inspect_log,
    output:
        rollouts="results/rollouts/{run}.jsonl",
        calls=CALL_LOGS["rollout"],
    threads: model_threads(run_model)
    resources:
        **model_resources(run_model, rollout_jobs),
    log:
        "logs/rollout/{run}.log",
    params:
        llm=llm_settings(),
        model=run_model,
        output=run_output_format,
        agent=run_agent_entry,
    conda:
        "../envs/aura.yaml"
    script:
        "../scripts/rollout.py"


rule judge_detection_type:
    input:
        dataset=FILES["dataset"],
        rollouts="results/rollouts/{run}.jsonl",
        prompts=stage_prompts("judge_detection_type"),
    output:
        judgments="results/judgments/{run}/detection_type/{judge}.jsonl",
        calls=CALL_LOGS["judge_detection_type"],
    threads: model_threads(judge_model)
    resources:
        **model_resources(judge_model, judge_jobs),
    log:
        "logs/judge/{run}/detection_type/{judge}.log",
    params:
        llm=llm_settings(),
        judge_model=judge_model,
    conda:
        "../envs/aura.yaml"
    script:
        "../scripts/judge_detection_type.py"


rule judge_safety:
    input:
        phase1=phase1_files,
        dataset=FILES["dataset"],
        rollouts="results/rollouts/{run}.jsonl",
        prompts=stage_prompts("judge_safety"),
    output:
        judgments="results/judgments/{run}/{judge}.jsonl",
        calls=CALL_LOGS["judge_safety"],
    threads: model_threads(judge_model)
    resources:
        **model_resources(judge_model, judge_jobs),
    log:
        "logs/judge/{run}/safety/{judge}.log",
    params:
        llm=llm_settings(),
        judge_model=judge_model,
        judges=judges(),
    conda:
        "../envs/aura.yaml"
    script:
        "../scripts/judge_safety.py"


rule labels:
    input:
        judgments=judgment_files,
        rollouts="results/rollouts/{run}.jsonl",
    output:
        "results/labels/{run}.jsonl",
    log:
        "logs/labels/{run}.log",
    params:
        judges=judges(),
    conda:
        "../envs/aura.yaml"
    script:
        "../scripts/labels.py"
