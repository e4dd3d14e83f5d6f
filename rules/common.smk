import glob
import os

from snakemake.utils import validate


validate(config, schema="../schemas/config.schema.yaml")

DOMAINS = ["Application", "Finance", "IoT", "Program", "Web"]
ACTION_ONLY_SUFFIX = ".action_only"
# The paper's tables and figures built from the labels (aura_eval/analysis.py, figures.py).
ANALYSIS_TABLES = [
    "table33_behaviour",
    "table31_nsp_sp_gap",
    "table32_matched_pairs_gap",
    "table35_flips",
    "table36_failure_mechanism",
    "table37_top_unsafe",
    "table38_prompt_format",
    "table21_judge_accuracy",
    "table22_accuracy_by_consensus",
    "table23_ensembles",
    "table24_vendor_swap",
    "table29_composition",
    "table3_human_reliability",
    "table18_retention",
    "table19_panel_strata",
    "table20_human_agreement",
]
AXES = ["detection", "action_type", "action_safety"]
ANALYSIS_FIGURES = [
    "fig4_unsafe_by_detection",
    "fig5_action_types",
    "fig6_unsafe_by_dimension",
    "fig7_detection_levels",
    "fig8_detection_by_action",
]


wildcard_constraints:
    run="[^/]+",
    judge="[^/]+",
    agent="[^/]+",


def model_threads():
    """Threads of a job that may run the embedded model: llama.cpp uses them all."""
    return min(2, workflow.cores)


def rjudge_files():
    return expand(
        "{dir}/{domain}/{kind}.json",
        dir=config["rjudge_dir"],
        domain=DOMAINS,
        kind=["harmful", "benign"],
    )


def as_list(names):
    return names if isinstance(names, list) else [names]


def model_entries(names):
    """The config entries of the named models: a change to them reruns the jobs that use them."""
    return {name: config["models"][name] for name in as_list(names)}


def role_models(role):
    return model_entries(config["roles"][role])


def judges():
    return as_list(config["roles"]["judges"])


def runs():
    """Every evaluated run: each agent in ReAct format, the action-only agents again."""
    react = list(config["agents"])
    return react + [a + ACTION_ONLY_SUFFIX for a in config["action_only"]["agents"]]


def run_agent(wildcards):
    return wildcards.run.removesuffix(ACTION_ONLY_SUFFIX)


def run_settings(wildcards):
    agent = config["agents"][run_agent(wildcards)]
    return {"agent": agent, "model": model_entries(agent["model"])}


def judge_model(wildcards):
    return model_entries(wildcards.judge)


def phase1_files(wildcards):
    """Every panel judge's detection and type judgments of a run, in the order of judges()."""
    return [f"results/judgments/{wildcards.run}/detection_type/{j}.jsonl" for j in judges()]


def judgment_files(wildcards):
    return [f"results/judgments/{wildcards.run}/{j}.jsonl" for j in judges()]


def vendor_swap_agents():
    """Agents sharing a vendor with a panel judge (paper F.4), when the analysis is on."""
    if not config["reliability"]["vendor_swap"]:
        return []
    vendors = {config["models"][j].get("vendor") for j in judges()}
    return [a for a, spec in config["agents"].items() if spec["vendor"] in vendors]


def reliability_files(kind):
    """The reliability run `kind` for every agent it applies to (none when switched off)."""
    rel = config["reliability"]
    if kind == "vendor_swap":
        agents = vendor_swap_agents()
    else:
        on = rel["five_judge_panel"] if kind == "five_judge" else rel["repeats"] > 0
        agents = list(config["agents"]) if on else []
    return expand("results/reliability/{kind}/{agent}.jsonl", kind=kind, agent=agents)


def reliability_outputs():
    return [p for kind in ("five_judge", "repeats", "vendor_swap") for p in reliability_files(kind)]


def reliability_models():
    roles = config["roles"]
    names = set(judges()) | set(as_list(roles.get("validation_judges", [])))
    names |= set(as_list(roles.get("replacement_judge", [])))
    return model_entries(sorted(names))


def audit_panel_files():
    """The panel labels the audit samples come from: the five-judge panel's where it runs."""
    if config["reliability"]["five_judge_panel"]:
        return reliability_files("five_judge")
    return expand("results/labels/{agent}.jsonl", agent=config["agents"])


def human_annotation_files():
    return sorted(glob.glob("data/human/annotations/*.csv"))


def human_adjudication_file():
    return [p for p in ["data/human/adjudicated.csv"] if os.path.exists(p)]


CONSTRUCTION_STAGES = ["relevance", "vary", "review_variations", "classify", "generate_pairs", "review_pairs"]


def prompt_files(*prompt_ids, taxonomy=False):
    """A stage's prompt files (and the dimension taxonomy where its prompts use it)."""
    files = [f"prompts/{p}.yaml" for p in prompt_ids]
    return files + (["prompts/taxonomy.yaml"] if taxonomy else [])


def call_logs():
    """Every job's call log: the report counts calls, tokens and cache hits from them."""
    logs = ["results/calls/tag_steps.jsonl"]
    logs += expand("results/calls/construct/{stage}.jsonl", stage=CONSTRUCTION_STAGES)
    logs += expand("results/calls/rollout/{run}.jsonl", run=runs())
    for run in runs():
        logs += expand("results/calls/judge/{run}/{phase}/{judge}.jsonl", run=run,
                       phase=["detection_type", "safety"], judge=judges())
    logs += [p.replace("results/reliability/", "results/calls/reliability/") for p in reliability_outputs()]
    return logs


def label_files():
    return expand("results/labels/{run}.jsonl", run=runs())


def get_final_output():
    return ["results/report/report.html"] + rules.annotation_pages.output
