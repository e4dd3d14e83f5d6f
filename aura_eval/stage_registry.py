"""The registry of model stages, beside the registry of tables and figures (artefact_registry).

A model stage is one rule whose jobs ask models something. Each is declared once, in the module
that implements it (`model_stage(...)` next to its request and row builders), with everything
the rest of the workflow needs to know about it: its rule (also its script, its entry point and
the `stage` field of its call log), the config role whose models answer, its prompt files, what
it asks about, where its rows and its call log go, and the requests it would send given its
inputs. The rules' prompt inputs and call logs, the stage order of the call tables, the pipeline
figure, the simulator's view of a request and the forecast all read this registry.

`registry()` imports the stage modules (`STAGE_MODULES`, in flow order) and returns the stages in
the order they registered. Nothing here imports more than the vocabulary.
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass, field
from typing import Callable

# The modules that declare model stages, in flow order (a stage in a new module: add it here).
STAGE_MODULES = ("construct.tagging", "construct.variation", "construct.pairing", "evaluate.rollout",
                 "evaluate.judging", "evaluate.reliability")


@dataclass(frozen=True)
class StageInputs:
    """What a stage's `requests` builder gets (the forecast calls it): `read(name)` gives the rows
    of a file of vocab.FILES or a path (None when it does not exist yet), `job` the job's
    wildcards, `models` the job's model entries (config entries with a `name`), `config` the run's."""

    read: Callable[[str], list | None]
    job: dict
    models: list[dict]
    config: dict


@dataclass(frozen=True)
class ModelStage:
    rule: str  # the rule, its script (scripts/<rule>.py) and entry point, and its call log's `stage`
    role: str  # the config role whose models answer (`agents` for a rollout: the run's agent)
    # prompt ids (prompts/<id>.yaml) the rule reads; for a construction stage the last is the one most of its
    # units use (P4, P6: ten of the eleven dimensions), which the forecast's estimate prices
    prompts: tuple[str, ...]
    units: str  # what it asks about, in a reader's words (one request per unit, per panel member)
    output: str  # the rows it writes, one per unit (a path with the rule's wildcards)
    calls: str  # its call log (a path with the rule's wildcards)
    wildcards: tuple[str, ...] = ()  # one job per value of these (from aura_eval.workflow.jobs)
    taxonomy: bool = False  # its prompts also read prompts/taxonomy.yaml
    groups: tuple[str, ...] = ()  # its call-log groups where a wildcard is part of them (reliability:<kind>)
    output_tokens: int = 300  # the forecast's guess of an answer's tokens before any call log shows them
    trajectory_copies: int = 1  # trajectories in one prompt (the forecast's estimate before its inputs exist)
    # StageInputs -> the requests the stage would send, or None while an input does not exist yet
    requests: Callable[[StageInputs], list | None] | None = field(default=None, compare=False)

    def call_groups(self) -> tuple[str, ...]:
        """The call-log groups of this stage (vocab.stage_group of its calls' `stage` field)."""
        return self.groups or (self.rule,)


_STAGES: dict[str, dict[str, ModelStage]] = {}  # declaring module -> rule -> stage, in declaration order


def model_stage(**fields) -> ModelStage:
    """Declare a model stage (at the top level of its module); a rule declared twice is an error."""
    stage, module = ModelStage(**fields), sys._getframe(1).f_globals["__name__"]
    declared = {rule: s for stages in _STAGES.values() for rule, s in stages.items()}
    if stage.rule in declared and declared[stage.rule] != stage:
        raise ValueError(f"model stage {stage.rule!r} declared twice")
    _STAGES.setdefault(module, {})[stage.rule] = stage
    return stage


def registry() -> dict[str, ModelStage]:
    """Every model stage, by rule, in flow order (the order of STAGE_MODULES, whatever the order
    the modules happened to be imported in)."""
    out: dict[str, ModelStage] = {}
    for module in STAGE_MODULES:
        importlib.import_module(f"aura_eval.{module}")
        out.update(_STAGES.get(f"aura_eval.{module}", {}))
    return out


def stage(rule: str) -> ModelStage:
    stages = registry()
    if rule not in stages:
        raise KeyError(f"unknown model stage {rule!r} (known: {', '.join(stages)})")
    return stages[rule]


def call_groups() -> tuple[str, ...]:
    """The call-log groups in flow order: how the call tables and the forecast list stages."""
    return tuple(group for s in registry().values() for group in s.call_groups())
