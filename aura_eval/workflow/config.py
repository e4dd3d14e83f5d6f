"""The configuration as the rules hand it to the package: defaults, canonical values, checked references.

The schema (schemas/config.schema.yaml) checks types and required keys and holds every default
that is a constant; `fill_defaults` fills those that depend on other keys (DEPENDENT_DEFAULTS);
`check_config` checks what a schema cannot: that every name can name files and run ids (the schema
holds its pattern; this says what is wrong with a name), that every role and agent names a defined
model, that only the batch providers' models (OpenAI, Anthropic, Gemini: `llm.providers`) ask for `batch: true`, every action-only and calibration
agent a defined agent, and that no sample needs more annotators than there are; `check_keys` that
the key variable of every model in use is set. All run before the first job.
"""

from __future__ import annotations

import copy
import itertools
from pathlib import Path

import yaml

from aura_eval.llm.providers import BATCH_PROVIDERS, KEYLESS_PROVIDERS, default_key_variable, is_simulated, provider_of
from aura_eval.vocab import NAME_RULE, name_problem

SCHEMA = Path(__file__).resolve().parents[2] / "schemas" / "config.schema.yaml"

ROLES = ("tagger", "judges", "validation_judges", "replacement_judge", "relevance", "generator", "reviewers",
         "classifier", "pair_generator", "pair_reviewers")
CONSTRUCTION_ROLES = ("relevance", "generator", "reviewers", "classifier", "pair_generator", "pair_reviewers")



class ConfigError(ValueError):
    """A config value that names something undefined; the message names the key and the value."""


CALIBRATION_AGENTS = 4  # paper F.1.1: the calibration and audit samples come from four evaluated models
ACTION_ONLY_AGENTS = 4  # paper J.4: four models spanning the frontier, open-weight and safety-tuned groups

# The defaults that depend on other keys, filled by `fill_defaults` where a config leaves the key
# unset; each text is the key's default in config/README.md's table.
DEPENDENT_DEFAULTS = {
    "roles.validation_judges": "`roles.judges`, while `reliability.five_judge_panel` is on (the paper's five add "
                               "GPT-4o and Claude Sonnet 4.6 to its three, F.2: name them to have five)",
    "roles.replacement_judge": "while `reliability.vendor_swap` re-judges an agent: the first model, among "
                               "`roles.validation_judges`, `roles.reviewers`, `roles.pair_reviewers` and then "
                               "the rest of `models`, that is not a panel judge and whose `vendor` no panel judge "
                               "has (the paper's DeepSeek-V4-Pro, F.4); none: a config error",
    "roles.relevance": "`roles.generator`",
    "roles.classifier": "`roles.generator`",
    "roles.pair_generator": "`roles.generator`",
    "roles.pair_reviewers": "`roles.reviewers` (the paper's one panel reviews variations and pairs, H.3)",
    "action_only.agents": f"{ACTION_ONLY_AGENTS} agents spanning the groups (paper J.4): one of each `group` in "
                          f"turn, each group's agents in config order",
    "reliability.calibration_agents": f"the first {CALIBRATION_AGENTS} agents under `agents` (paper F.1.1: four "
                                      f"evaluated models); all of them when fewer",
}
_SAME_AS = (("relevance", "generator"), ("classifier", "generator"), ("pair_generator", "generator"),
            ("pair_reviewers", "reviewers"))


def as_list(names) -> list:
    """A role's names as a list: a role names one model or a list of them."""
    return list(names) if isinstance(names, list) else [names]


def _shown(value) -> str:
    return "[" + ", ".join(map(str, value)) + "]" if isinstance(value, list) else str(value)


def load_schema() -> dict:
    return yaml.safe_load(SCHEMA.read_text(encoding="utf-8"))


def with_schema_defaults(config: dict, schema: dict | None = None) -> dict:
    """A copy of `config` with the schema's defaults where a key is unset, as Snakemake's
    `validate(..., set_default=True)` fills them (a default applies where its parent object
    exists; each section's `default: {}` makes it exist): for tools that read a config file
    outside Snakemake. Checks nothing (a value of the wrong type is left as it is)."""

    def fill(instance, node):
        if not isinstance(instance, dict):
            return
        properties = node.get("properties", {})
        for key, sub in properties.items():
            if "default" in sub:
                instance.setdefault(key, copy.deepcopy(sub["default"]))
            if key in instance:
                fill(instance[key], sub)
        if isinstance(node.get("additionalProperties"), dict):
            for key in instance.keys() - properties.keys():
                fill(instance[key], node["additionalProperties"])

    config = copy.deepcopy(config)
    fill(config, schema or load_schema())
    return config


DEFAULT_CONFIGFILE = "config/config.yaml"  # the Snakefile's `configfile:`, read only when no --configfile is given


def merge_configs(*configs: dict) -> dict:
    """Several configs as one, merged by Snakemake's own `update_config` (what it does with its
    `--configfile`s): a later mapping updates the earlier one key by key at every level, any other value
    replaces it whole. The inputs are left unchanged."""
    from snakemake.utils import update_config

    merged: dict = {}
    for config in configs:
        update_config(merged, copy.deepcopy(config or {}))
    return merged


def load_configs(paths) -> dict:
    """The config files in `paths`, in order, merged (`merge_configs`). A file that cannot be read or
    does not hold a mapping raises ConfigError naming it."""
    configs = []
    for path in paths:
        try:
            config = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as err:
            raise ConfigError(f"config file {path}: {err}") from err
        if not isinstance(config, (dict, type(None))):
            raise ConfigError(f"config file {path} does not hold a mapping of keys")
        configs.append(config)
    return merge_configs(*configs)


def vendor_swap_agents(config: dict) -> list[str]:
    """The agents sharing a vendor with a panel judge (paper F.4), when `reliability.vendor_swap` is on."""
    if not (config.get("reliability") or {}).get("vendor_swap"):
        return []
    models = config.get("models") or {}
    vendors = {models[j].get("vendor") for j in as_list((config.get("roles") or {}).get("judges", [])) if j in models}
    return [agent for agent, spec in (config.get("agents") or {}).items() if spec.get("vendor") in vendors - {None}]


def _replacement_judge(config: dict) -> str | None:
    """DEPENDENT_DEFAULTS["roles.replacement_judge"], or None where no model qualifies."""
    models, roles = config.get("models") or {}, config.get("roles") or {}
    panel = as_list(roles.get("judges", []))
    panel_vendors = {models[j].get("vendor") for j in panel if j in models}
    candidates = [*roles.get("validation_judges", []), *roles.get("reviewers", []), *roles.get("pair_reviewers", []),
                  *models]
    return next((name for name in candidates if name in models and name not in panel
                 and models[name].get("vendor") and models[name]["vendor"] not in panel_vendors), None)


def inspect_log_problem(agent: str, spec: dict, action_only_agents: list) -> str | None:
    """What is wrong with an agent's model or inspect log (aura_eval.evaluate.inspect_log), or None:
    an agent names a model or an inspect log of the ReAct task, never both; its action-only run
    (when it is under action_only.agents) needs a second log of the action-only task."""
    if ("model" in spec) == ("inspect_log" in spec):
        return (f"config: agent {agent!r} names {'both' if 'model' in spec else 'neither'} a model and an "
                f"inspect_log: give exactly one")
    if "inspect_log_action_only" in spec and "inspect_log" not in spec:
        return f"config: agent {agent!r} has inspect_log_action_only without inspect_log"
    if "inspect_log" in spec and agent in action_only_agents and "inspect_log_action_only" not in spec:
        return (f"config: agent {agent!r} is given by an inspect log and listed under action_only.agents: give "
                f"its action-only log (inspect eval ... -T action_only=true) as inspect_log_action_only, or "
                f"leave it out of action_only.agents")
    return None


def _spanning_groups(agents: dict, n: int) -> list[str]:
    """Up to n agents, one of each group in turn (groups in the order they first appear); an agent
    given by an inspect log only where it has an action-only log too."""
    by_group: dict = {}
    for name, spec in agents.items():
        if "inspect_log" in spec and "inspect_log_action_only" not in spec:
            continue
        by_group.setdefault(spec.get("group"), []).append(name)
    return [name for turn in itertools.zip_longest(*by_group.values()) for name in turn if name is not None][:n]


def fill_defaults(config: dict) -> list[str]:
    """Fill, in place, each DEPENDENT_DEFAULTS key the config leaves unset; call it after the
    schema's defaults (which make the sections exist). Returns one line per filled value
    (`config: <key> not set; using <value>`). Raises ConfigError, naming the agents and the panel's
    vendors, when the vendor swap needs a replacement judge that no model can be."""
    lines = []

    def fill(section, key, value):
        config.setdefault(section, {})[key] = value
        lines.append(f"config: {section}.{key} not set; using {_shown(value)}")

    roles, agents = config.get("roles") or {}, config.get("agents") or {}
    reliability = config.get("reliability") or {}
    for role, source in _SAME_AS:
        if role not in roles and source in roles:
            fill("roles", role, copy.deepcopy(roles[source]))
    if "validation_judges" not in roles and reliability.get("five_judge_panel") and "judges" in roles:
        fill("roles", "validation_judges", as_list(roles["judges"]))
    swapped = vendor_swap_agents(config)
    if "replacement_judge" not in roles and swapped:
        name = _replacement_judge(config)
        if name is None:
            models = config.get("models") or {}
            vendors = sorted({str(models[j].get("vendor")) for j in as_list(roles["judges"]) if j in models})
            raise ConfigError(f"config: reliability.vendor_swap re-judges agent(s) {', '.join(swapped)}, but "
                              f"roles.replacement_judge is not set and no model under 'models' has a vendor "
                              f"outside the panel's ({', '.join(vendors)}); set roles.replacement_judge, or "
                              f"reliability.vendor_swap: false")
        fill("roles", "replacement_judge", name)
    if "agents" not in (config.get("action_only") or {}):
        fill("action_only", "agents", _spanning_groups(agents, ACTION_ONLY_AGENTS))
    if "calibration_agents" not in reliability:
        fill("reliability", "calibration_agents", list(agents)[:CALIBRATION_AGENTS])
    return lines


def complete_config(config: dict) -> tuple[dict, list[str]]:
    """A config file's values as the workflow sees them (for tools that read the file): a copy with
    the schema's defaults and then the dependent ones, and fill_defaults' lines."""
    config = with_schema_defaults(config)
    return config, fill_defaults(config)


def canonical(value):
    """The value with every mapping's keys sorted (lists keep their order): a rule param that
    Snakemake compares by value, so reordering keys in the config never reruns a job."""
    if isinstance(value, dict):
        return {key: canonical(value[key]) for key in sorted(value)}
    if isinstance(value, (list, tuple)):
        return [canonical(v) for v in value]
    return value


def _named(config: dict):
    """(key path, name) of every name the config gives or refers to: the models and agents it defines
    (`models`, `agents`: the path is the mapping's), the role members, the action-only and calibration
    agents, the annotators. Tolerates values of the wrong type (the schema has refused them)."""
    for section in ("models", "agents"):
        if isinstance(config.get(section), dict):
            yield from ((section, name) for name in config[section])
    lists = [(f"roles.{role}", names) for role, names in (config.get("roles") or {}).items()]
    lists += [("action_only.agents", (config.get("action_only") or {}).get("agents")),
              ("reliability.calibration_agents", (config.get("reliability") or {}).get("calibration_agents")),
              ("validation.annotators", (config.get("validation") or {}).get("annotators"))]
    for path, names in lists:
        if isinstance(names, list):
            yield from ((f"{path}[{i}]", name) for i, name in enumerate(names))
        elif names is not None:
            yield path, names


def check_names(config: dict) -> None:
    """Raise ConfigError naming the key path and the name when a model, agent, role member or annotator
    name cannot name files and run ids (vocab.NAME_PATTERN; no run-id suffix such as `.action_only`).
    The schema holds the same pattern; this says what is wrong, and catches a trailing newline, which
    the pattern's `$` lets by under Python's regular expressions."""
    for path, name in _named(config):
        problem = name_problem(name)
        if problem:
            what = "defines the name" if path in ("models", "agents") else "is"
            raise ConfigError(f"config: {path} {what} {name!r}, which {problem}; {NAME_RULE}")


def check_config(config: dict) -> None:
    """Raise ConfigError naming the key path and the name when a name cannot name files (check_names),
    naming the role, agent or model when a reference is undefined, when
    validation.annotators_per_sample exceeds the number of annotators, or when simulated
    annotators are asked for in a run with a model that is not simulated."""
    check_names(config)
    models = config.get("models") or {}
    unknown_roles = sorted(set(config.get("roles") or {}) - set(ROLES))
    if unknown_roles:
        raise ConfigError(f"config: unknown role(s) {', '.join(unknown_roles)} under 'roles' "
                          f"(known: {', '.join(ROLES)})")
    for role, names in (config.get("roles") or {}).items():
        for name in names if isinstance(names, list) else [names]:
            if name not in models:
                raise ConfigError(f"config: role {role!r} names model {name!r}, which is not under 'models' "
                                  f"(defined: {', '.join(sorted(models))})")
    for name, spec in models.items():
        if spec.get("batch") and provider_of(spec.get("model", "")) not in BATCH_PROVIDERS:
            raise ConfigError(f"config: model {name!r} ({spec.get('model')}) has batch: true, but only "
                              f"{', '.join(p + '/...' for p in BATCH_PROVIDERS)} models have a batch API here")
    for agent, spec in (config.get("agents") or {}).items():
        problem = inspect_log_problem(agent, spec, (config.get("action_only") or {}).get("agents") or [])
        if problem:
            raise ConfigError(problem)
        if "inspect_log" in spec:
            continue
        if spec.get("model") not in models:
            raise ConfigError(f"config: agent {agent!r} names model {spec.get('model')!r}, which is not under 'models' "
                              f"(defined: {', '.join(sorted(models))})")
    for agent in (config.get("action_only") or {}).get("agents", []):
        if agent not in (config.get("agents") or {}):
            raise ConfigError(f"config: action_only.agents names {agent!r}, which is not under 'agents'")
    for agent in (config.get("reliability") or {}).get("calibration_agents") or []:
        if agent not in (config.get("agents") or {}):
            raise ConfigError(f"config: reliability.calibration_agents names {agent!r}, which is not under 'agents' "
                              f"(defined: {', '.join(sorted(config.get('agents') or {}))})")
    validation = config.get("validation") or {}
    per_sample, annotators = validation.get("annotators_per_sample"), validation.get("annotators") or []
    if isinstance(per_sample, int) and isinstance(annotators, list) and per_sample > len(annotators):
        raise ConfigError(f"config: validation.annotators_per_sample is {per_sample}, but validation.annotators "
                          f"names only {len(annotators)} annotator(s)")
    if validation.get("simulated_annotators"):
        real = [name for name in used_models(config) if not is_simulated(models[name]["model"])]
        if real:
            raise ConfigError(f"config: validation.simulated_annotators is allowed only in a simulated run, but "
                              f"model(s) {', '.join(real)} are not aura_sim (simulated labels never stand in "
                              f"for people's)")


def check_keys(config: dict, environ) -> None:
    """Raise ConfigError, naming each model and variable, when a used model's key is unset."""
    missing = missing_keys(config, environ)
    if missing:
        raise ConfigError("provider keys missing (set them, or run with llm.replay: true on a finished "
                          "run's cache):\n  " + "\n  ".join(missing))


def used_models(config: dict) -> list[str]:
    """The model entries some role or agent uses, sorted."""
    names = set()
    for value in (config.get("roles") or {}).values():
        names |= set(value if isinstance(value, list) else [value])
    names |= {spec.get("model") for spec in (config.get("agents") or {}).values()}
    return sorted(n for n in names if n in (config.get("models") or {}))


def key_variable(spec: dict) -> str | None:
    """The environment variable a model entry's calls need, or None (embedded model, litellm's
    canned answers, or a self-hosted endpoint that names no key variable)."""
    if provider_of(spec["model"]) in KEYLESS_PROVIDERS or "mock_response" in (spec.get("params") or {}):
        return None
    if spec.get("api_key_env"):
        return spec["api_key_env"]
    return None if spec.get("api_base") else default_key_variable(spec["model"])


def missing_keys(config: dict, environ) -> list[str]:
    """One line per used model whose key variable is unset (none in replay mode: no call is made)."""
    if (config.get("llm") or {}).get("replay"):
        return []
    missing = []
    for name in used_models(config):
        variable = key_variable(config["models"][name])
        if variable and not environ.get(variable):
            missing.append(f"model {name!r} ({config['models'][name]['model']}) needs {variable}, which is not set")
    return missing
