"""The configuration as the rules hand it to the package: canonical values, checked references.

The schema (schemas/config.schema.yaml) checks types and required keys; `check_config`
checks what a schema cannot: that every role and agent names a defined model, and every
action-only agent a defined agent. Both run before the first job.
"""

from __future__ import annotations

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
    """Raise ConfigError naming the role, agent or model when a reference is undefined."""
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
    for agent, spec in (config.get("agents") or {}).items():
        if spec.get("model") not in models:
            raise ConfigError(f"config: agent {agent!r} names model {spec.get('model')!r}, which is not under 'models' "
                              f"(defined: {', '.join(sorted(models))})")
    for agent in (config.get("action_only") or {}).get("agents", []):
        if agent not in (config.get("agents") or {}):
            raise ConfigError(f"config: action_only.agents names {agent!r}, which is not under 'agents'")
