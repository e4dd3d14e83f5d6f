# Benchmark construction (paper §4.3, C.2-C.3, H.2-H.3): one job per stage, items
# batched inside it. Every row keeps its prompt id and version, model, raw response
# and parse status; the release rule writes the evaluation items.


rule relevance:
    input:
        prefixes="results/prefixes/prefixes.jsonl",
        prompts=prompt_files("p2_dimension_relevance", taxonomy=True),
    output:
        relevance="results/construct/relevance.jsonl",
        candidates="results/construct/candidates.jsonl",
        calls="results/calls/construct/relevance.jsonl",
    threads: model_threads()
    log:
        "logs/construct/relevance.log",
    params:
        models=role_models("relevance"),
        settings=config["construction"],
    conda:
        "../envs/aura.yaml"
    script:
        "../scripts/construct_relevance.py"


rule vary:
    input:
        candidates="results/construct/candidates.jsonl",
        prefixes="results/prefixes/prefixes.jsonl",
        prompts=prompt_files("p3_intensity_variation", "p4_context_variation", taxonomy=True),
    output:
        variations="results/construct/variations.jsonl",
        calls="results/calls/construct/vary.jsonl",
    threads: model_threads()
    log:
        "logs/construct/vary.log",
    params:
        models=role_models("generator"),
    conda:
        "../envs/aura.yaml"
    script:
        "../scripts/construct_vary.py"


rule review_variations:
    input:
        variations="results/construct/variations.jsonl",
        prefixes="results/prefixes/prefixes.jsonl",
        prompts=prompt_files("p5_intensity_review", "p6_context_review", taxonomy=True),
    output:
        reviews="results/construct/variation_reviews.jsonl",
        calls="results/calls/construct/review_variations.jsonl",
    threads: model_threads()
    log:
        "logs/construct/review_variations.log",
    params:
        models=role_models("reviewers"),
    conda:
        "../envs/aura.yaml"
    script:
        "../scripts/construct_review_variations.py"


rule classify:
    input:
        prefixes="results/prefixes/prefixes.jsonl",
        variations="results/construct/variations.jsonl",
        reviews="results/construct/variation_reviews.jsonl",
        prompts=prompt_files("p7_pair_classification"),
    output:
        pool="results/construct/pool.jsonl",
        calls="results/calls/construct/classify.jsonl",
    threads: model_threads()
    log:
        "logs/construct/classify.log",
    params:
        models=role_models("classifier"),
    conda:
        "../envs/aura.yaml"
    script:
        "../scripts/construct_classify.py"


rule generate_pairs:
    input:
        pool="results/construct/pool.jsonl",
        seeds="results/seeds/seeds.jsonl",
        prompts=prompt_files("p8_pair_generation"),
    output:
        pairs="results/construct/pairs.jsonl",
        calls="results/calls/construct/generate_pairs.jsonl",
    threads: model_threads()
    log:
        "logs/construct/generate_pairs.log",
    params:
        models=role_models("pair_generator"),
    conda:
        "../envs/aura.yaml"
    script:
        "../scripts/construct_generate_pairs.py"


rule review_pairs:
    input:
        pairs="results/construct/pairs.jsonl",
        pool="results/construct/pool.jsonl",
        prompts=prompt_files("p9_pair_review"),
    output:
        reviews="results/construct/pair_reviews.jsonl",
        calls="results/calls/construct/review_pairs.jsonl",
    threads: model_threads()
    log:
        "logs/construct/review_pairs.log",
    params:
        models=role_models("pair_reviewers"),
    conda:
        "../envs/aura.yaml"
    script:
        "../scripts/construct_review_pairs.py"


rule release:
    input:
        prefixes="results/prefixes/prefixes.jsonl",
        relevance="results/construct/relevance.jsonl",
        candidates="results/construct/candidates.jsonl",
        variations="results/construct/variations.jsonl",
        reviews="results/construct/variation_reviews.jsonl",
        pool="results/construct/pool.jsonl",
        pairs="results/construct/pairs.jsonl",
        pair_reviews="results/construct/pair_reviews.jsonl",
    output:
        dataset="results/dataset/aura_eval.jsonl",
        excluded="results/dataset/excluded.jsonl",
        card="results/dataset/README.md",
        funnel="results/construct/funnel.json",
    log:
        "logs/construct/release.log",
    params:
        settings=config["construction"],
        roles=config["roles"],
    conda:
        "../envs/aura.yaml"
    script:
        "../scripts/construct_release.py"


rule tables_construction:
    input:
        "results/construct/funnel.json",
    output:
        funnel_csv="results/tables/construction_funnel.csv",
        funnel_md="results/tables/construction_funnel.md",
        losses_csv="results/tables/construction_losses.csv",
        losses_md="results/tables/construction_losses.md",
        dimensions_csv="results/tables/variations_by_dimension.csv",
        dimensions_md="results/tables/variations_by_dimension.md",
    log:
        "logs/tables_construction.log",
    conda:
        "../envs/aura.yaml"
    script:
        "../scripts/tables_construction.py"
