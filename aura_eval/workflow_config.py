"""The configuration as the rules hand it to the package: canonical values, checked references.

The schema (schemas/config.schema.yaml) checks types and required keys; `check_config`
checks what a schema cannot: that every role and agent names a defined model, that only
the batch providers' models (OpenAI, Anthropic: `llm.providers`) ask for `batch: true`, every action-only and calibration agent a
defined agent, and that no sample needs more annotators than there are; `check_keys` that
the key variable of every model in use is set. All run before the first job.
"""

from __future__ import annotations

from aura_eval.llm.providers import BATCH_PROVIDERS, KEYLESS_PROVIDERS, default_key_variable, is_simulated, provider_of

ROLES = ("tagger", "judges", "validation_judges", "replacement_judge", "relevance", "generator", "reviewers",
         "classifier", "pair_generator", "pair_reviewers")
CONSTRUCTION_ROLES = ("relevance", "generator", "reviewers", "classifier", "pair_generator", "pair_reviewers")



class ConfigError(ValueError):
    """A config value that names something undefined; the message names the key and the value."""


def canonical(value):
    """The value with every mapping's keys sorted (lists keep their order): a rule param that
    Snakemake compares by value, so reordering keys in the config never reruns a job."""
    if isinstance(value, dict):
        return {key: canonical(value[key]) for key in sorted(value)}
    if isinstance(value, (list, tuple)):
        return [canonical(v) for v in value]
    return value


def check_config(config: dict) -> None:
    """Raise ConfigError naming the role, agent or model when a reference is undefined, when
    validation.annotators_per_sample exceeds the number of annotators, or when simulated
    annotators are asked for in a run with a model that is not simulated."""
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
