# Benchmark construction (paper §4.3, C.2-C.3, H.2-H.3): one job per stage, items
# batched inside it. Every row keeps its prompt id and version, model, raw response
# and parse status; the release rule writes the evaluation items.


rule relevance:
    input:
        prefixes=FILES["prefixes"],
        prompts=stage_prompts("relevance"),
    output:
        relevance=FILES["relevance"],
        candidates=FILES["candidates"],
        calls=CALL_LOGS["relevance"],
    threads: model_threads(role_models("relevance"))
    resources:
        **model_resources(role_models("relevance")),
    log:
        "logs/construct/relevance.log",
    params:
        llm=llm_settings(),
        models=role_models("relevance"),
        max_per_prefix=config["construction"]["max_candidates_per_prefix"],
    conda:
        "../envs/aura.yaml"
    script:
        "../scripts/relevance.py"


rule vary:
    input:
        candidates=FILES["candidates"],
        prefixes=FILES["prefixes"],
        prompts=stage_prompts("vary"),
    output:
        variations=FILES["variations"],
        calls=CALL_LOGS["vary"],
    threads: model_threads(role_models("generator"))
    resources:
        **model_resources(role_models("generator")),
    log:
        "logs/construct/vary.log",
    params:
        llm=llm_settings(),
        models=role_models("generator"),
    conda:
        "../envs/aura.yaml"
    script:
        "../scripts/vary.py"


rule review_variations:
    input:
        variations=FILES["variations"],
        prefixes=FILES["prefixes"],
        prompts=stage_prompts("review_variations"),
    output:
        reviews=FILES["variation_reviews"],
        calls=CALL_LOGS["review_variations"],
    threads: model_threads(role_models("reviewers"))
    resources:
        **model_resources(role_models("reviewers")),
    log:
        "logs/construct/review_variations.log",
    params:
        llm=llm_settings(),
        models=role_models("reviewers"),
    conda:
        "../envs/aura.yaml"
    script:
        "../scripts/review_variations.py"


rule classify:
    input:
        prefixes=FILES["prefixes"],
        variations=FILES["variations"],
        reviews=FILES["variation_reviews"],
        prompts=stage_prompts("classify"),
    output:
        pool=FILES["pool"],
        calls=CALL_LOGS["classify"],
    threads: model_threads(role_models("classifier"))
    resources:
        **model_resources(role_models("classifier")),
    log:
        "logs/construct/classify.log",
    params:
        llm=llm_settings(),
        models=role_models("classifier"),
    conda:
        "../envs/aura.yaml"
    script:
        "../scripts/classify.py"


rule generate_pairs:
    input:
        pool=FILES["pool"],
        seeds=FILES["seeds"],
        prompts=stage_prompts("generate_pairs"),
    output:
        pairs=FILES["pairs"],
        calls=CALL_LOGS["generate_pairs"],
    threads: model_threads(role_models("pair_generator"))
    resources:
        **model_resources(role_models("pair_generator")),
    log:
        "logs/construct/generate_pairs.log",
    params:
        llm=llm_settings(),
        models=role_models("pair_generator"),
    conda:
        "../envs/aura.yaml"
    script:
        "../scripts/generate_pairs.py"


rule review_pairs:
    input:
        pairs=FILES["pairs"],
        pool=FILES["pool"],
        prompts=stage_prompts("review_pairs"),
    output:
        reviews=FILES["pair_reviews"],
        calls=CALL_LOGS["review_pairs"],
    threads: model_threads(role_models("pair_reviewers"))
    resources:
        **model_resources(role_models("pair_reviewers")),
    log:
        "logs/construct/review_pairs.log",
    params:
        llm=llm_settings(),
        models=role_models("pair_reviewers"),
    conda:
        "../envs/aura.yaml"
    script:
        "../scripts/review_pairs.py"


rule release:
    input:
        prefixes=FILES["prefixes"],
        relevance=FILES["relevance"],
        candidates=FILES["candidates"],
        variations=FILES["variations"],
        reviews=FILES["variation_reviews"],
        pool=FILES["pool"],
        pairs=FILES["pairs"],
        pair_reviews=FILES["pair_reviews"],
    output:
        dataset=FILES["dataset"],
        excluded=FILES["excluded"],
        funnel=FILES["funnel"],
    log:
        "logs/construct/release.log",
    params:
        settings=canonical(config["construction"]),
    conda:
        "../envs/aura.yaml"
    script:
        "../scripts/release.py"
