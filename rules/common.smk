import glob
import os
import sys
import time
from types import SimpleNamespace

from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

from aura_eval import stage_registry, vocab
from aura_eval.artefact_registry import FIGURES, TABLES
from aura_eval.workflow import jobs, run_config
from aura_eval.workflow.slurm_check import slurm_status_problem
from aura_eval.llm import ratelimit, stop
from aura_eval.llm.settings import RESOURCE as CALL_SETTINGS_RESOURCE
from aura_eval.llm.settings import CallSettings, answer_entry
from aura_eval.llm.providers import is_simulated
from aura_eval.vocab import (ACTION_ONLY, AGENT_PROMPTS, AXES, DOMAINS, FILES, JUDGE_PROMPTS, PROMPT_INPUTS, REACT,
                             RELIABILITY_KINDS, parse_run, run_name)
from aura_eval.llm.cache import CacheError, CacheLocationError, check_at_start, fold_at_end
from aura_eval.stage_runner import call_log_problems, failed_calls_summary
from aura_eval.workflow.config import (CONSTRUCTION_ROLES, ConfigError, canonical, check_config, check_keys,
                                       fill_defaults, used_models)

# The run's stop mark (aura_eval.llm.stop): every job of this run finds it through the environment.
os.environ[stop.ENV] = os.path.abspath(stop.MARK_NAME)


# The schema first: it fills its defaults (set_default; a config says only what differs). Then the
# defaults that depend on other keys, each said on stderr, then the references. Where the schema
# refuses a config that also names something undefined, the reference's message (the role and the
# model, or the misspelled role) stands in for the schema's.
try:
    try:
        validate(config, schema="../schemas/config.schema.yaml", set_default=True)
    except WorkflowError:
        check_config(config)
        raise
    for line in fill_defaults(config):
        print(line, file=sys.stderr)
    check_config(config)
except ConfigError as err:
    raise WorkflowError(str(err)) from None


wildcard_constraints:
    run="[^/]+",
    judge="[^/]+",
    agent="[^/]+",


# -- what a job reads of the config: only through params, canonical (sorted keys), so a
# job reruns when, and only when, a value it uses changes ---------------------------------


# -- what a model job reserves: threads, and a share of each rate limit it calls under -----
# Each `llm.rate_limits` limit is a global resource whose total is the limit, so the jobs the
# scheduler runs at once (on one machine or a cluster's many) never hold more than the whole; a
# value given with `--resources` wins. Network model jobs reserve no core, so their number has its
# own cap (`llm.max_network_jobs`).
# How calls are made (timeouts, retries, limits, batch, prices, ...): no answer depends on them, so they
# reach the jobs as a string resource, never as params, and changing one reruns nothing.
CALL_SETTINGS = CallSettings.from_config(config)
RATE_LIMITS = CALL_SETTINGS.rate_limits
try:
    _run_resources = {**ratelimit.global_resources(RATE_LIMITS),
                      ratelimit.NETWORK_JOBS: CALL_SETTINGS.max_network_jobs}
except ValueError as err:
    raise WorkflowError(str(err)) from None
for _name, _total in _run_resources.items():
    if _name in workflow.global_resources:
        _run_resources[_name] = workflow.global_resources[_name].value
    else:
        workflow.register_resource(_name, _total)
# The limits in force (`--resources` included): the shares divide these.
RATE_LIMITS = {key: {kind: _run_resources[ratelimit.resource_name(kind, key)] for kind in spec}
               for key, spec in RATE_LIMITS.items()}


def job_model_strings(models, wildcards):
    """The litellm model strings of a job's models (`models`: entries, or a function of wildcards)."""
    return [entry["model"] for entry in (models(wildcards) if callable(models) else models)]


def model_threads(models):
    """A model job's threads: the embedded model's up to 2 (llama.cpp computes on them; 1 in a replay), the
    simulator's 1, none for network models, which wait (aura_eval.llm.ratelimit.job_threads)."""

    def threads(wildcards):
        return ratelimit.job_threads(job_model_strings(models, wildcards), workflow.cores,
                                     bool((config.get("llm") or {}).get("replay")))

    return threads


def model_resources(models, rule_jobs=None):
    """A model job's resources: its share of each rate limit its models call under (a model's own
    key before its provider's; 1/`llm.jobs_per_rate_limit` of it, or 1/n where only n of its rule's
    jobs, `rule_jobs()`'s model entries, call under that key), and a network-job slot."""

    def requested(wildcards):
        strings = job_model_strings(models, wildcards)
        peers = [job_model_strings(entries, wildcards) for entries in rule_jobs()] if rule_jobs else None
        shares = ratelimit.job_resources(strings, RATE_LIMITS, CALL_SETTINGS.jobs_per_rate_limit, peers)
        return shares | {ratelimit.NETWORK_JOBS: int(ratelimit.is_network_job(strings)),
                         ratelimit.PACING: ratelimit.pacing_resource(shares, RATE_LIMITS),
                         CALL_SETTINGS_RESOURCE: CALL_SETTINGS.resource()}

    def resource(name):
        def value(wildcards):
            return requested(wildcards).get(name) or None  # None: not requested (not listed)

        return value

    return {name: resource(name) for name in [*_run_resources, ratelimit.PACING, CALL_SETTINGS_RESOURCE]}


def llm_settings():
    """The `llm` keys that change answers (the cache, replay, the simulator's parameters). An empty
    `simulation` (the schema's default) is left out, as before it had one: the same value, no rerun."""
    return canonical({key: value for key, value in config["llm"].items()
                      if key not in CallSettings.keys() and not (key == "simulation" and value == {})})


def model_entries(names):
    """The named models' config entries, in the role's order (a review panel's votes keep it)."""
    return [canonical(answer_entry({"name": name, **config["models"][name]})) for name in jobs.as_list(names)]


def role_models(role):
    return model_entries(config["roles"][role])


def judges():
    return jobs.judges(config)


def run_agent(wildcards):
    return parse_run(wildcards.run)[0]


def run_model(wildcards):
    """The agent's model entry; none for an agent given by an inspect log (no model call)."""
    model = config["agents"][run_agent(wildcards)].get("model")
    return model_entries(model) if model else []


def run_inspect_log(wildcards):
    """The inspect log the run's rollouts are read from, as a list ([] where a model answers)."""
    path = jobs.run_inspect_log(config, wildcards.run)
    return [path] if path else []


def run_agent_entry(wildcards):
    """The agent's config entry (group, vendor, output): what the simulator's agents draw from."""
    return canonical(config["agents"][run_agent(wildcards)])


def simulated_run():
    """Whether a model this run uses is the simulator (its report then says so on every page)."""
    return any(is_simulated(config["models"][name]["model"]) for name in used_models(config))


def uses_cache():
    """Whether the run reads or writes answers in the cache (a run of simulated models only never does)."""
    return not all(is_simulated(config["models"][name]["model"]) for name in used_models(config))


def fold_cache_at_end():
    """The cache left as one file at the run's end: its last jobs' answers may still sit in its -wal
    (aura_eval.llm.cache.fold_at_end); a replay never writes it."""
    if uses_cache() and not config["llm"].get("replay"):
        note = fold_at_end(config["llm"]["cache"])
        if note:
            print(note, file=sys.stderr)


def run_output_format(wildcards):
    return config["agents"][run_agent(wildcards)].get("output", "text")


def run_items(wildcards):
    """An action-only run reads the subset; a ReAct run the whole dataset (and not the subset)."""
    return FILES["subset"] if parse_run(wildcards.run)[1] == ACTION_ONLY else FILES["dataset"]


def run_prompt(wildcards):
    return f"prompts/{AGENT_PROMPTS[(parse_run(wildcards.run)[1], run_output_format(wildcards))]}.yaml"


def prompt_files(*prompt_ids, taxonomy=False):
    """Prompt files (and the dimension taxonomy where the prompts use it)."""
    files = [f"prompts/{p}.yaml" for p in prompt_ids]
    return files + (["prompts/taxonomy.yaml"] if taxonomy else [])


def stage_prompts(rule):
    """A model stage's prompt files, as its registry entry lists them (aura_eval.stage_registry)."""
    entry = MODEL_STAGES[rule]
    return prompt_files(*entry.prompts, taxonomy=entry.taxonomy)


def judge_model(wildcards):
    return model_entries(wildcards.judge)


def rollout_jobs():
    """The model entries of every rollout job of this run (the peers a rollout shares limits with)."""
    return [run_model(SimpleNamespace(run=run)) for run in runs()]


def judge_jobs():
    """The model entries of every judge job of one phase (run x judge)."""
    return [model_entries(judge) for _ in runs() for judge in judges()]


def reliability_jobs():
    return [reliability_models(SimpleNamespace(**job)) for job in jobs.stage_jobs(config, ("kind", "agent"))]


def reliability_models(wildcards):
    """Every model a reliability run calls: its panel and, for the vendor swap, the replacement."""
    settings = reliability_settings(wildcards)
    return settings["panel"] + settings.get("replacement", [])


def reliability_settings(wildcards):
    """Exactly what one reliability run uses (see aura_eval/evaluate/reliability.py)."""
    rel, roles = config["reliability"], config["roles"]
    if wildcards.kind == "five_judge":
        settings = {"panel": model_entries(roles["validation_judges"]), "calibration_items": rel["calibration_items"],
                    "calibration_agents": rel["calibration_agents"]}
    elif wildcards.kind == "repeats":
        settings = {"panel": model_entries(judges()), "calibration_items": rel["calibration_items"],
                    "calibration_agents": rel["calibration_agents"], "repeats": rel["repeats"]}
    else:
        settings = {"panel": model_entries(judges()), "replacement": model_entries(roles["replacement_judge"]),
                    "agent_vendor": config["agents"][wildcards.agent]["vendor"], "items": rel["vendor_swap_items"]}
    return canonical(settings)


def reliability_labels(wildcards):
    """The agent's panel labels: the vendor swap compares with them, and every reliability run waits
    for them, so that the panel judges' answers on the same prompts (the five-judge panel's and the
    repeats' first sample ask the panel judges what the judge jobs asked) come from the cache instead
    of being sent, and paid, a second time by a job running beside them."""
    return f"results/labels/{wildcards.agent}.jsonl"


def judge_prompt_files(*axes):
    return [f"prompts/{JUDGE_PROMPTS[axis]}.yaml" for axis in axes]


def config_values(keys):
    """A table's config values, without what changes no answer (the call settings: a resource). A key
    `section.key` gives that one entry, under its section ({section: {key: value}}), so a job reruns
    only when that entry changes."""
    values = {}
    for key in keys:
        section, _, entry = key.partition(".")
        if entry:
            values.setdefault(section, {})[entry] = config[section][entry]
        else:
            values[key] = config[key]
    if "llm" in values:
        values["llm"] = {k: v for k, v in values["llm"].items() if k not in CallSettings.keys()}
    if "models" in values:
        values["models"] = {name: answer_entry(spec) for name, spec in values["models"].items()}
    return {key: canonical(value) for key, value in values.items()}


def artefact_resources():
    """A table's or figure's resources: the call settings, for the tables that show them (the others
    ignore them; a group's jobs must all carry the same string resources), and one of the slots the
    cluster profile gives each submission of the group "artefacts" (rules/analysis.smk)."""
    return {CALL_SETTINGS_RESOURCE: CALL_SETTINGS.resource(), "artefact_slots": 1}


# -- the jobs of this run -----------------------------------------------------------------


def rjudge_files():
    return expand("{dir}/{domain}/{kind}.json", dir=config["rjudge_dir"], domain=DOMAINS,
                  kind=["harmful", "benign"])


# The job plan is aura_eval.workflow.jobs's (the forecast counts the same jobs); these read this run's config.
def runs():
    return jobs.runs(config)


def phase1_files(wildcards):
    """Every panel judge's detection and type judgments of a run, in the order of judges()."""
    return [f"results/judgments/{wildcards.run}/detection_type/{j}.jsonl" for j in judges()]


def judgment_files(wildcards):
    return [f"results/judgments/{wildcards.run}/{j}.jsonl" for j in judges()]


def calibration_agents():
    return jobs.calibration_agents(config)


def reliability_agents(kind):
    return jobs.reliability_agents(config, kind)


def reliability_files(kind):
    """The reliability run `kind` for every agent it applies to (none when switched off)."""
    return expand("results/reliability/{kind}/{agent}.jsonl", kind=kind, agent=reliability_agents(kind))


def audit_panel_files():
    """The calibration agents' panel labels the audit samples come from: the five-judge
    panel's where it runs, else the judge panel's."""
    if config["reliability"]["five_judge_panel"]:
        return reliability_files("five_judge")
    return expand("results/labels/{agent}.jsonl", agent=calibration_agents())


def simulated_annotators():
    return bool(config["validation"].get("simulated_annotators", False))


def human_annotation_files():
    """People's exported CSVs; in a simulated run with simulated annotators, theirs instead."""
    if simulated_annotators():
        return expand("results/validation/simulated/{annotator}.csv", annotator=config["validation"]["annotators"])
    return sorted(glob.glob("data/human/annotations/*.csv"))


def human_adjudication_file():
    if simulated_annotators():
        return []
    return [p for p in ["data/human/adjudicated.csv"] if os.path.exists(p)]


def label_files():
    return expand("results/labels/{run}.jsonl", run=runs())


def react_runs():
    return jobs.react_runs(config)


# Every model stage (aura_eval.stage_registry) and its call log, by rule: the report counts calls, tokens and
# cache hits from them.
MODEL_STAGES = stage_registry.registry()
CALL_LOGS = {rule: entry.calls for rule, entry in MODEL_STAGES.items()}


# Every job that calls a model runs on the host running Snakemake, whatever the executor (a no-op
# for local runs): the response cache is one SQLite file, safe only on one host's local disk
# (README, "Running on a cluster"); the CPU jobs go to the cluster.
workflow.localrules(*CALL_LOGS)


def call_logs():
    """The call log of every model job of this run: each stage's, for each of its jobs."""
    return [entry.calls.format(**job) for entry in MODEL_STAGES.values()
            for job in jobs.stage_jobs(config, entry.wildcards)]


# -- tables and figures: each reads only the inputs its registry entry names -----------------

FILE_LISTS = {"calls": call_logs, "labels": label_files,
              "react_labels": lambda: expand("results/labels/{run}.jsonl", run=react_runs()),
              "react_rollouts": lambda: expand("results/rollouts/{run}.jsonl", run=react_runs()),
              "five_judge": lambda: reliability_files("five_judge"),
              "repeats": lambda: reliability_files("repeats"), "vendor_swap": lambda: reliability_files("vendor_swap"),
              "samples": lambda: [f"results/validation/sample_{axis}.jsonl" for axis in AXES]}
assert set(FILE_LISTS) == set(vocab.FILE_LISTS), "aura_eval.vocab.FILE_LISTS and rules/common.smk disagree"


def artefact_input(name):
    """A per-job list (FILE_LISTS), prompt files (PROMPT_INPUTS, a list) or one shared file (FILES)."""
    if name in FILE_LISTS:
        return FILE_LISTS[name]()
    if name in PROMPT_INPUTS:
        return prompt_files(*PROMPT_INPUTS[name])
    return FILES[name]


def artefact_inputs(spec):
    return {name: artefact_input(name) for name in spec.inputs}


def report_inputs():
    """Every table and figure of the registries."""
    files = [path for spec in TABLES.values() for path in spec.outputs("table").values()]
    files += [path for spec in FIGURES.values() for path in spec.outputs("figure").values()]
    return files


REPORT_CATEGORY = "AURA-Eval report"  # Snakemake's report: the category of our report and the audit site


def report_sections():
    """{table or figure: the section of paper/report.qmd that shows it} (Snakemake report categories)."""
    from aura_eval.report.sections import sections

    return sections(os.path.join(workflow.basedir, "paper", "report.qmd"))


# Snakemake's report (`snakemake --report report.zip`) shows each table's CSV (a Markdown-only table: its
# Markdown) and each figure's PNG, with its registry caption (paper/captions/artefact.rst reads the
# `caption` param), filed under the section of our report that shows it (aura_eval.report.sections).
def shown_in_report(spec, kind):
    outputs = spec.outputs(kind)
    shown = "png" if kind == "figure" else ("csv" if "csv" in outputs else "md")
    outputs[shown] = report(outputs[shown], caption="../paper/captions/artefact.rst",
                            category=REPORT_SECTIONS[spec.name], subcategory=f"{kind.title()}s",
                            labels={"name": spec.name, "kind": kind})
    return outputs


REPORT_SECTIONS = report_sections()


def get_final_output():
    # The release's card and Croissant file: nothing else reads them.
    release_description = [FILES["card"], FILES["croissant"]]
    return ["results/report", "results/audit"] + rules.annotation_pages.output + release_description


# The config file(s) of the run that renders the report, for its "What was run" section. Passed in
# the environment, not as a param: the file's name is provenance, so the same config under another
# name (or with its keys reordered) reruns nothing.
def _shown_path(path):
    """A config file as the report names it: relative to the working or the workflow's directory,
    else its name alone (never a machine path)."""
    for base in (os.getcwd(), workflow.basedir):  # the basedir: where the Snakefile is
        rel = os.path.relpath(path, base)
        if not rel.startswith(".."):
            return rel
    return os.path.basename(path)


# (Set, never read here, so snakemake's `envvars` check does not apply.)
RUN_CONFIGFILES = [_shown_path(path) for path in (workflow.overwrite_configfiles or ["config/config.yaml"])]
os.environ.update(AURA_CONFIGFILES=os.pathsep.join(RUN_CONFIGFILES))
# When the run started (the onstart's record), for the failed-call summary of onerror.
run_started = []


def report_sources():
    """For each table, the intermediate files it was computed from (the report links them); lists
    sorted, so a reordered config gives the same value."""
    return {name: {entry: sorted(paths) if isinstance(paths, list) else paths
                   for entry, paths in artefact_inputs(spec).items()} for name, spec in TABLES.items()}
