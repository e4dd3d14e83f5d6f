# Benchmark construction (paper §4.3, C.2-C.3, H.2-H.3): one job per stage, items
# batched inside it. Every row keeps its prompt id and version, model, raw response
# and parse status; the release rule writes the evaluation items.


rule relevance:
    input:
        prefixes=FILES["prefixes"],
        prompts=prompt_files("p2_dimension_relevance", taxonomy=True),
    output:
        relevance="results/construct/relevance.jsonl",
        candidates="results/construct/candidates.jsonl",
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
        candidates="results/construct/candidates.jsonl",
        prefixes=FILES["prefixes"],
        prompts=prompt_files("p3_intensity_variation", "p4_context_variation", taxonomy=True),
    output:
        variations="results/construct/variations.jsonl",
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
        variations="results/construct/variations.jsonl",
        prefixes=FILES["prefixes"],
        prompts=prompt_files("p5_intensity_review", "p6_context_review", taxonomy=True),
    output:
        reviews="results/construct/variation_reviews.jsonl",
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
        variations="results/construct/variations.jsonl",
        reviews="results/construct/variation_reviews.jsonl",
        prompts=prompt_files("p7_pair_classification"),
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
        prompts=prompt_files("p8_pair_generation"),
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
        prompts=prompt_files("p9_pair_review"),
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
        relevance="results/construct/relevance.jsonl",
        candidates="results/construct/candidates.jsonl",
        variations="results/construct/variations.jsonl",
        reviews="results/construct/variation_reviews.jsonl",
        pool=FILES["pool"],
        pairs=FILES["pairs"],
        pair_reviews=FILES["pair_reviews"],
    output:
        dataset=FILES["dataset"],
        excluded="results/dataset/excluded.jsonl",
        card=FILES["card"],
        funnel=FILES["funnel"],
    log:
        "logs/construct/release.log",
    params:
        settings=canonical(config["construction"]),
        roles=canonical({role: config["roles"][role] for role in CONSTRUCTION_ROLES}),
    conda:
        "../envs/aura.yaml"
    script:
        "../scripts/release.py"
