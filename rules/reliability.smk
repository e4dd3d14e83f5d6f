rule reliability:
    input:
        dataset="results/dataset/aura_eval.jsonl",
        rollouts="results/rollouts/{agent}.jsonl",
        labels="results/labels/{agent}.jsonl",
        prompts=["prompts/judge_detection.yaml", "prompts/judge_action_type.yaml",
                 "prompts/judge_action_safety.yaml"],
    output:
        rows="results/reliability/{kind}/{agent}.jsonl",
        calls="results/calls/reliability/{kind}/{agent}.jsonl",
    threads: model_threads()
    log:
        "logs/reliability/{kind}/{agent}.log",
    wildcard_constraints:
        kind="five_judge|repeats|vendor_swap",
    params:
        roles=config["roles"],
        judge_models=reliability_models(),
        settings=config["reliability"],
    conda:
        "../envs/aura.yaml"
    script:
        "../scripts/reliability.py"
