"""Croissant 1.1 metadata of the release (results/dataset/croissant.json), with the Responsible-AI
vocabulary (http://mlcommons.org/croissant/RAI/), written from what the run knows: its counts, the
construction models by role, each file's sha256, and whether its models were simulated.

The three JSONL files are FileObjects; each has one record set whose fields name their column
(`extract.column`) and, for nested values, a JSONPath (`transform.jsonPath`). `provenance` varies
between rows (its keys depend on how the row was made), so only its stable parts are fields; the
whole object stays in the JSONL.
"""

from __future__ import annotations

from dataclasses import dataclass

from aura_eval.construct.uses import (biases, citation, intended_uses, limitations, out_of_scope_uses,
                                      personal_information)
from aura_eval.vocab import (DATA_LICENCE, RELEASE_CREATOR, RELEASE_DATE, RELEASE_VERSION, RJUDGE_SHORT,
                             RJUDGE_URL, data_terms)

CONFORMS_TO = ["http://mlcommons.org/croissant/1.1", "http://mlcommons.org/croissant/RAI/1.0"]
JSONL = "application/jsonlines"

# The JSON-LD context of Croissant 1.1 (its specification, appendix 1), with the four keys mlcroissant's
# context also has (path, repeated, replace, samplingRate): without them it warns the context is not standard.
CONTEXT = {
    "@language": "en", "@vocab": "https://schema.org/", "sc": "https://schema.org/",
    "cr": "http://mlcommons.org/croissant/", "rai": "http://mlcommons.org/croissant/RAI/",
    "dct": "http://purl.org/dc/terms/", "annotation": "cr:annotation", "arrayShape": "cr:arrayShape",
    "citeAs": "cr:citeAs", "column": "cr:column", "conformsTo": "dct:conformsTo", "containedIn": "cr:containedIn",
    "data": {"@id": "cr:data", "@type": "@json"}, "dataType": {"@id": "cr:dataType", "@type": "@vocab"},
    "equivalentProperty": "cr:equivalentProperty", "examples": {"@id": "cr:examples", "@type": "@json"},
    "excludes": "cr:excludes", "extract": "cr:extract", "field": "cr:field", "fileProperty": "cr:fileProperty",
    "fileObject": "cr:fileObject", "fileSet": "cr:fileSet", "format": "cr:format", "includes": "cr:includes",
    "isArray": "cr:isArray", "isLiveDataset": "cr:isLiveDataset", "jsonPath": "cr:jsonPath", "key": "cr:key",
    "md5": "cr:md5", "parentField": "cr:parentField", "recordSet": "cr:recordSet", "references": "cr:references",
    "regex": "cr:regex", "readLines": "cr:readLines", "sdVersion": "cr:sdVersion", "separator": "cr:separator",
    "source": "cr:source", "subField": "cr:subField", "transform": "cr:transform", "unArchive": "cr:unArchive",
    "value": "cr:value", "path": "cr:path", "repeated": "cr:repeated", "replace": "cr:replace",
    "samplingRate": "cr:samplingRate",
}

TEXT, INTEGER = "sc:Text", "sc:Integer"
STEP_KEYS = [("index", INTEGER), ("turn", INTEGER), ("role", TEXT), ("content", TEXT), ("thought", TEXT),
             ("action", TEXT)]


@dataclass(frozen=True)
class Column:
    """A record set's field: a JSONL column; `array` for a list; `parts` for an object's (or a list of objects')
    sub-fields, each (name, dataType, JSONPath within the object)."""
    name: str
    description: str
    data_type: str | None = TEXT
    array: bool = False
    parts: tuple = ()


ITEM_COLUMNS = [
    Column("item_id", "The item's id: seed id, decision point, dimension (and .pair for a generated counterpart)."),
    Column("seed_id", "The R-Judge record the item adapts: <domain>-<R-Judge id>."),
    Column("domain", "R-Judge's domain: Application, Finance, IoT, Program or Web."),
    Column("decision_point", "at_trigger or pre_execution: where the trajectory was cut."),
    Column("dimension", "original, or the varied dimension (RS1-RS6, SD1-SD5)."),
    Column("pair_label", "NSP (No-Safe-Path) or SP (Safe-Path)."),
    Column("pair_id", "Shared by the two versions of a kept pair; null when unpaired."),
    Column("counterpart_id", "The other version's item id; null when unpaired."),
    Column("profile", "The agent's system profile from R-Judge."),
    Column("instruction", "The user's instruction (the first user step)."),
    Column("steps", "The prefix the evaluated model sees, one entry per step; the model writes the next agent step. "
           "User and environment steps have content, agent steps thought and action.", None, array=True,
           parts=tuple((key, kind, key) for key, kind in STEP_KEYS)),
    Column("reference_rationale", "The scenario-specific risk the action-safety judges grade against."),
    Column("evidence", "What in the scenario decided the label; null for generated counterparts."),
    Column("safe_action_sketches", "Safe-Path items: fulfilling actions that avoid the risk; null otherwise.",
           array=True),
    Column("unsafe_explanation", "No-Safe-Path items: why every fulfilling action brings the risk; null otherwise."),
    Column("provenance", "How the row was made. Its keys differ between originals, variations and generated "
           "counterparts; the JSONL holds the whole object (prompts, models, votes), these are its stable parts.",
           None, parts=(("prefix_id", TEXT, "prefix_id"), ("origin_kind", TEXT, "origin.kind"))),
]
EXCLUDED_COLUMNS = [
    Column("item_id", "The candidate's item id."),
    Column("seed_id", "The R-Judge record it adapts."),
    Column("reason", "Why it was filtered out at release; the reason starts with its category."),
]


def _field(record_set: str, file_id: str, column: Column) -> dict:
    field = {"@type": "cr:Field", "@id": f"{record_set}/{column.name}", "name": column.name,
             "description": column.description}
    source = {"fileObject": {"@id": file_id}, "extract": {"column": column.name}}
    if column.array:
        field["isArray"] = True
    if column.parts:  # sub-fields read from the column's object(s) by JSONPath
        field["subField"] = [
            {"@type": "cr:Field", "@id": f"{record_set}/{column.name}/{name}", "name": name,
             "description": f"`{path}` of {column.name}", "dataType": kind,
             "source": {**source, "transform": {"jsonPath": path}}} for name, kind, path in column.parts]
    else:
        field.update(dataType=column.data_type, source=source)
    return field


def _record_set(record_set: str, file_id: str, description: str, fields: list) -> dict:
    return {"@type": "cr:RecordSet", "@id": record_set, "name": record_set, "description": description,
            "key": {"@id": f"{record_set}/item_id"},
            "field": [_field(record_set, file_id, column) for column in fields]}


def croissant(files: dict, facts: dict) -> dict:
    """The JSON-LD document. `files`: record-set name -> (file name, sha256, description); `facts`: what
    `release_facts` gathers (counts, funnel, models by role, simulated)."""
    distribution = [{"@type": "cr:FileObject", "@id": name, "name": name, "description": description,
                     "contentUrl": name, "encodingFormat": JSONL, "sha256": sha256}
                    for name, sha256, description in files.values()]
    record_sets = [_record_set(key, files[key][0], files[key][2],
                               EXCLUDED_COLUMNS if key == "excluded" else ITEM_COLUMNS) for key in files]
    doc = {"@context": CONTEXT, "@type": "sc:Dataset", "conformsTo": CONFORMS_TO,
           "name": facts["name"], "description": facts["description"],
           "license": DATA_LICENCE.url, "citeAs": citation(), "version": RELEASE_VERSION,
           "datePublished": RELEASE_DATE, "creator": {"@type": "sc:Organization", "name": RELEASE_CREATOR},
           "isBasedOn": RJUDGE_URL, "keywords": facts["tags"], "inLanguage": "en",
           "distribution": distribution, "recordSet": record_sets}
    doc.update({f"rai:{key}": value for key, value in rai(facts).items()})
    return doc


def _panel(facts: dict, role: str) -> str:
    """A review panel's size in words: the run's config decides it (the paper's panels have three models)."""
    n = len(facts["models"].get(role, []))
    return f"{n} reviewer model{'s' if n != 1 else ''}"


def rai(facts: dict) -> dict:
    """The Responsible-AI properties, in our words, from the run's facts."""
    sim = facts["simulated"]
    made_by = "; ".join(f"{role}: {', '.join(models)}" for role, models in facts["models"].items())
    simulated = ("SIMULATED RUN: every construction answer of this release was drawn by AURA-Eval's planted-truth "
                 "simulator (aura_sim/), not written by a language model; its texts are placeholders and its "
                 "labels are synthetic, useful only to test the pipeline. " if sim else "")
    return {
        "dataCollection": simulated + (
            f"No new data was collected from people. The rows adapt {facts['seeds']} R-Judge trajectories with "
            f"attack_type unintended ({RJUDGE_SHORT}). Each seed was cut at its risk trigger "
            f"and, where it differs, before the agent's execution point ({facts['funnel'].get('prefixes', 0)} "
            f"prefixes). Language models then proposed controlled rewrites of user and environment steps along "
            f"one risk dimension at a time, with every agent step kept character for character, and generated "
            f"minimal counterparts of the opposite pair label; review panels of models kept or rejected each."),
        "dataCollectionType": ["Secondary Data analysis", "Software Collection"] + (["Others: simulated"] if sim else []),
        "dataCollectionRawData": f"R-Judge ({RJUDGE_URL}): 571 multi-turn agent trajectories in five domains.",
        "dataPreprocessingProtocol": [
            "Seeds: R-Judge records with attack_type unintended, checked for structure (a malformed record stops "
            "the run, naming it).",
            f"Release filter: rows without a usable label, with no user instruction, ending with an agent step, or "
            f"with too short an instruction are excluded with their reason (excluded.jsonl: "
            f"{facts['excluded']} rows)."],
        "dataAnnotationProtocol": (
            "Every label is machine-made. A classifier model labels each prefix No-Safe-Path or Safe-Path and writes "
            "the reference risk rationale, the evidence and safe-action sketches or the unsafe explanation; "
            f"a panel of {_panel(facts, 'reviewers')} votes on each variation and one of "
            f"{_panel(facts, 'pair_reviewers')} on each generated pair, and a majority keeps it. Models by role: "
            f"{made_by}. No person labelled the released rows in this workflow; its human validation (data/human/) "
            f"checks the judges' labels of model continuations, not these rows."),
        "machineAnnotationTools": [f"{role}: {', '.join(models)}" for role, models in facts["models"].items()],
        "annotationsPerItem": (f"One label (pair_label) per item, from one classifier call; each variation had "
                               f"{_panel(facts, 'reviewers')} votes, each generated pair {_panel(facts, 'pair_reviewers')} "
                               f"(provenance holds them)."),
        "dataBiases": biases(facts),
        "dataLimitations": limitations(facts),
        "personalSensitiveInformation": personal_information(),
        "dataUseCases": ["Intended: " + " ".join(intended_uses()), "Out of scope: " + " ".join(out_of_scope_uses())],
        "dataSocialImpact": ("Meant to make agent-safety failures measurable before deployment; the scenarios "
                             "describe risky actions in words only."),
        "dataReleaseMaintenancePlan": (
            f"Version {RELEASE_VERSION}. The workflow regenerates the release from the response cache byte for "
            f"byte; a new version follows a change of code, prompts, models or seeds. {data_terms()}"),
    }
