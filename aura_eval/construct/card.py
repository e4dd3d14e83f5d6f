"""The release's description, written by the `dataset_card` rule once the three files exist: the dataset
card (results/dataset/README.md: a Hugging Face card whose YAML front matter names the licence, the three
configs and their features; every field of a released row and the counts) and the Croissant metadata
(results/dataset/croissant.json, aura_eval.construct.croissant)."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path

import pandas as pd
import yaml

from aura_eval.construct.croissant import croissant
from aura_eval.construct.funnel import funnel_table, losses_table, reason_legend
from aura_eval.construct.uses import (biases, citation, intended_uses, limitations, out_of_scope_uses,
                                      personal_information)
from aura_eval.llm.providers import is_simulated
from aura_eval.util.jsonl import atomic_write_text, read_jsonl
from aura_eval.util.table_files import header, markdown
from aura_eval.vocab import DATA_LICENCE, FILES, ORIGINAL, PAPER_TITLE, RJUDGE_SHORT, data_terms

FIELDS = {
    "item_id": "`<seed id>.<decision point>.<dimension>`, plus `.pair` for a generated counterpart",
    "seed_id": "the R-Judge record: `<domain>-<R-Judge id>`",
    "domain": "Application, Finance, IoT, Program or Web",
    "decision_point": "`at_trigger` (cut at the risk trigger) or `pre_execution` (cut before the execution point)",
    "dimension": "`original` or the varied dimension, RS1-RS6 (risk mechanism) or SD1-SD5 (scenario difficulty)",
    "pair_label": "`NSP` (No-Safe-Path) or `SP` (Safe-Path) at the decision point",
    "pair_id": "`pair:<item id of the source>` shared by the two versions of a kept pair; null when unpaired",
    "counterpart_id": "the other version's item id; null when unpaired",
    "profile": "the agent's system profile from R-Judge",
    "instruction": "the user's instruction (the first user step) as the evaluated model sees it",
    "steps": "the prefix exactly as the evaluated model sees it; the model writes the next agent step",
    "reference_rationale": "the scenario-specific risk the action-safety judges grade against",
    "evidence": "what in the scenario decided the label (classified rows; null for generated counterparts)",
    "safe_action_sketches": "Safe-Path: fulfilling actions that avoid the risk, written with the tools shown",
    "unsafe_explanation": "No-Safe-Path: why every fulfilling action brings about the risk",
    "provenance": "prefix id, how the row was made (original, variation or pair), prompt ids and versions, "
                  "models, each reviewer's vote, and a removed counterpart's reason",
}


# The three files of the release, each a config of the Hugging Face dataset and a Croissant record set:
# config name -> (FILES key, what it holds). Every config has one split, `test`.
CONFIGS = {
    "items": ("dataset", "the evaluation items, one row each"),
    "action_only_subset": ("subset", "the items of the action-only prompt-format study (paper J.4)"),
    "excluded": ("excluded", "candidates filtered out at release, each with its reason"),
}
SPLIT = "test"
TASK_CATEGORIES = ["text-generation"]  # the evaluated model writes the next agent step
TAGS = ["agent-safety", "llm-agents", "tool-use", "benchmark", "safety-evaluation", "r-judge"]

# The card's `dataset_info` features (the Hugging Face YAML form): steps are a list of step objects whose
# keys depend on the role (a missing key loads as null); provenance varies between rows, so it is Json.
_TEXT = "string"
STEP_FEATURES = [{"name": n, "dtype": t} for n, t in (("index", "int64"), ("turn", "int64"), ("role", _TEXT),
                                                       ("content", _TEXT), ("thought", _TEXT), ("action", _TEXT))]
ITEM_FEATURES = [
    *({"name": n, "dtype": _TEXT} for n in ("item_id", "seed_id", "domain", "decision_point", "dimension",
                                             "pair_label", "pair_id", "counterpart_id", "profile", "instruction")),
    {"name": "steps", "list": STEP_FEATURES},
    {"name": "reference_rationale", "dtype": _TEXT}, {"name": "evidence", "dtype": _TEXT},
    {"name": "safe_action_sketches", "list": _TEXT}, {"name": "unsafe_explanation", "dtype": _TEXT},
    {"name": "provenance", "dtype": "json"},
]
EXCLUDED_FEATURES = [{"name": n, "dtype": _TEXT} for n in ("item_id", "seed_id", "reason")]


def size_category(n: int) -> str:
    """The Hugging Face size category of n rows."""
    bounds = [(1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M")]
    return next((name for bound, name in bounds if n < bound), "1M<n<10M")


def _file_name(key: str) -> str:
    return Path(FILES[key]).name


def loadable(sizes: dict) -> list[str]:
    """The configs the card declares: a file with no rows is none (datasets refuses to load an empty split)."""
    return [name for name in CONFIGS if sizes[name]]


def front_matter(facts: dict, sizes: dict) -> dict:
    """The card's YAML metadata: licence, name, task, tags, size, and each config with its file and features,
    so that `load_dataset` reads exactly these files whatever their names."""
    return {
        "license": DATA_LICENCE.id, "pretty_name": facts["name"], "language": ["en"],
        "task_categories": TASK_CATEGORIES, "tags": facts["tags"], "size_categories": [size_category(sizes["items"])],
        "configs": [{"config_name": name, **({"default": True} if name == "items" else {}),
                     "data_files": [{"split": SPLIT, "path": _file_name(CONFIGS[name][0])}]}
                    for name in loadable(sizes)],
        # No `splits` here: datasets reads them only with num_bytes, the size of its own Arrow files.
        "dataset_info": [{"config_name": name,
                          "features": EXCLUDED_FEATURES if name == "excluded" else ITEM_FEATURES}
                         for name in loadable(sizes)],
    }


def release_facts(rows: list[dict], excluded: list[dict], funnel: dict, roles: dict, models: dict) -> dict:
    """What the card's metadata and the Croissant file say about this run. `roles`: construction role ->
    model name(s); `models`: model name -> litellm model string."""
    by_role = {role: [models[n] for n in (names if isinstance(names, list) else [names])]
               for role, names in roles.items()}
    simulated = any(is_simulated(m) for ms in by_role.values() for m in ms)
    name = "AURA-Eval" + (" (SIMULATED)" if simulated else "")
    domains = ", ".join(f"{k} {v}" for k, v in sorted(Counter(r["domain"] for r in rows).items()))
    labels = Counter(r["pair_label"] for r in rows)
    description = (
        ("SIMULATED: every model answer behind this release was drawn by AURA-Eval's planted-truth simulator; "
         "the rows test the pipeline and are not a benchmark. " if simulated else "")
        + f"AURA-Eval evaluation items ({PAPER_TITLE}): {len(rows)} fixed prefixes of agent trajectories "
        f"adapted from {len({r['seed_id'] for r in rows})} R-Judge records, each labelled No-Safe-Path "
        f"({labels.get('NSP', 0)}) or Safe-Path ({labels.get('SP', 0)}); an evaluated model writes the next agent "
        f"step. {funnel.get('paired rows', 0)} rows form minimal pairs of opposite labels. Adapted from "
        f"{RJUDGE_SHORT}, under {DATA_LICENCE.spdx}.")
    return {"name": name, "simulated": simulated, "description": description, "models": by_role,
            "tags": TAGS + (["simulated"] if simulated else []), "seeds": len({r["seed_id"] for r in rows}),
            "funnel": funnel, "excluded": len(excluded), "domains": domains}


class _Dumper(yaml.SafeDumper):
    def ignore_aliases(self, data):  # the configs' shared features written out each time, no `&id001`
        return True


def _sha256(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def dataset_card(inputs, outputs, roles: dict, models: dict) -> dict:
    """dataset_card stage: reads the three release files and funnel.json, writes the card and croissant.json."""
    read = {name: read_jsonl(getattr(inputs, key)) for name, (key, _) in CONFIGS.items()}
    funnel = json.loads(Path(inputs.funnel).read_text(encoding="utf-8"))
    sizes = {name: len(rows) for name, rows in read.items()}
    facts = {**release_facts(read["items"], read["excluded"], funnel["funnel"], roles, models), "sizes": sizes}
    meta = yaml.dump(front_matter(facts, sizes), Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100)
    body = card_body(read["items"], funnel["funnel"], funnel["by_dimension"], roles, facts)
    atomic_write_text(outputs.card, f"---\n{meta}---\n\n{body}")
    files = {name: (_file_name(key), _sha256(getattr(inputs, key)), f"{_file_name(key)}: {what}")
             for name, (key, what) in CONFIGS.items()}
    atomic_write_text(outputs.croissant,
                      json.dumps(croissant(files, facts), indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    return sizes


# -- the card's text ----------------------------------------------------------------------

def _release_lines(facts: dict) -> list[str]:
    banner = ([f"**{facts['description'].split('. ')[0]}.**", ""] if facts["simulated"] else [])
    return banner + [
        "## Loading", "",
        "The folder is a Hugging Face dataset; each config reads one file into one split (`test`):", "",
        *[f"- `{name}`{' (the default)' if name == 'items' else ''}: `{_file_name(key)}`, {what} "
          f"({facts['sizes'][name]} rows)" if facts["sizes"][name] else
          f"- `{_file_name(key)}` has no rows in this run, so it is no config (datasets cannot load an empty file)"
          for name, (key, what) in CONFIGS.items()], "",
        "```python", "from datasets import load_dataset",
        'items = load_dataset("results/dataset", split="test")  # the default config',
        'subset = load_dataset("results/dataset", "action_only_subset", split="test")', "```", "",
        "`steps` loads with every step key (`content` is null on agent steps, `thought` and `action` on the "
        "others); `provenance` loads as a JSON object. `croissant.json` describes the same files in Croissant 1.1 "
        "with its Responsible-AI fields.", "",
        *_use_lines(facts),
        "## Licence", "", data_terms(), "",
        "## Citation", "", "```bibtex", citation(), "```", ""]


def _use_lines(facts: dict) -> list[str]:
    """The card's Uses, Out-of-scope use, Bias, risks and limitations and Personal information sections,
    from the texts croissant.json's RAI fields also read (aura_eval.construct.uses)."""
    return ["## Uses", "", *[f"- {line}" for line in intended_uses()], "",
            "## Out-of-scope use", "", *[f"- {line}" for line in out_of_scope_uses()], "",
            "## Bias, risks and limitations", "", *[f"- {line}" for line in biases(facts) + limitations(facts)], "",
            "## Personal information", "", personal_information(), ""]


def card_body(rows: list[dict], counts: dict, dims: list[dict], roles: dict, facts: dict | None = None) -> str:
    def tally(field):
        return ", ".join(f"{k} {v}" for k, v in sorted(Counter(str(r[field]) for r in rows).items()))

    lines = [f"# {facts['name'] if facts else 'AURA-Eval'} dataset (generated)", "",
             "Written by the `dataset_card` rule; regenerate it, do not edit it. One row per evaluation item in "
             "`aura_eval.jsonl` (sorted by `item_id`); rows filtered out at release are in `excluded.jsonl` "
             "with their reason; every construction stage's rows, with raw model responses, are under "
             "`results/construct/`.", ""]
    lines += _release_lines(facts) if facts else []
    lines += ["## Fields", "", "| field | meaning |", "|---|---|"]
    lines += [f"| `{k}` | {v} |" for k, v in FIELDS.items()]
    lines += ["", "## Counts", "", f"- rows: {len(rows)} from {len({r['seed_id'] for r in rows})} seeds",
              f"- dimension: original {sum(r['dimension'] == ORIGINAL for r in rows)}, "
              f"variation {sum(r['dimension'] != ORIGINAL for r in rows)}",
              f"- pair label: {tally('pair_label')}",
              f"- paired rows {counts['paired rows']} ({counts['paired rows'] // 2} pairs), "
              f"unpaired rows {len(rows) - counts['paired rows']}",
              f"- decision point: {tally('decision_point')}", f"- domain: {tally('domain')}", "",
              "## Construction funnel", "", markdown(funnel_table(counts)).rstrip(), "",
              "Losses between stages, by reason:", "", markdown(losses_table(counts, titled=True)).rstrip(), ""]
    legend = reason_legend(counts)
    if legend:
        lines += ["Each reason starts with its category:", "",
                  *[f"- `{category}`: {meaning}" for category, meaning in legend], ""]
    per_dimension = pd.DataFrame(dims).rename(columns=lambda c: header(c, "variations_by_dimension"))
    lines += ["## Per dimension", "", markdown(per_dimension).rstrip()]
    lines += ["", "## Models by role", ""]
    lines += [f"- {role}: {', '.join(names) if isinstance(names, list) else names}" for role, names in roles.items()]
    return "\n".join(lines) + "\n"


