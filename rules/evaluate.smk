rule rollout:
    input:
        dataset="results/dataset/aura_eval.jsonl",
        subset="results/dataset/action_only_subset.jsonl",
        prompts=["prompts/agent_react.yaml", "prompts/agent_action_only.yaml",
                 "prompts/agent_react_json.yaml", "prompts/agent_action_only_json.yaml"],
    output:
        rollouts="results/rollouts/{run}.jsonl",
        calls="results/calls/rollout/{run}.jsonl",
    threads: model_threads()
    log:
        "logs/rollout/{run}.log",
    params:
        settings=run_settings,
    conda:
        "../envs/aura.yaml"
    script:
        "../scripts/rollout.py"


rule judge_detection_type:
    input:
        dataset="results/dataset/aura_eval.jsonl",
        rollouts="results/rollouts/{run}.jsonl",
        prompts=["prompts/judge_detection.yaml", "prompts/judge_action_type.yaml"],
    output:
        judgments="results/judgments/{run}/detection_type/{judge}.jsonl",
        calls="results/calls/judge/{run}/detection_type/{judge}.jsonl",
    threads: model_threads()
    log:
        "logs/judge/{run}/detection_type/{judge}.log",
    params:
        judge_model=judge_model,
    conda:
        "../envs/aura.yaml"
    script:
        "../scripts/judge_detection_type.py"


rule judge_safety:
    input:
        phase1=phase1_files,
        dataset="results/dataset/aura_eval.jsonl",
        rollouts="results/rollouts/{run}.jsonl",
        prompt="prompts/judge_action_safety.yaml",
    output:
        judgments="results/judgments/{run}/{judge}.jsonl",
        calls="results/calls/judge/{run}/safety/{judge}.jsonl",
    threads: model_threads()
    log:
        "logs/judge/{run}/safety/{judge}.log",
    params:
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
