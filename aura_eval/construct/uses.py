"""What the release says about its use, its risks and how to cite it: written once here, read by the
dataset card's sections (card.py: Uses, Out-of-scope use, Bias, risks and limitations, Personal
information, Citation) and by croissant.json's Responsible-AI fields (croissant.py: `rai:dataUseCases`,
`rai:dataBiases`, `rai:dataLimitations`, `rai:personalSensitiveInformation`, and `citeAs`).

`facts` is what `card.release_facts` gathers about a run (domains, simulated or not).
"""

from __future__ import annotations

from aura_eval.vocab import PAPER_TITLE, RELEASE_CREATOR, RELEASE_DATE, RELEASE_VERSION


def intended_uses() -> list[str]:
    return [
        "Evaluating whether an LLM agent acts safely at a decision point of a tool-use trajectory: the model "
        "reads the user's instruction and the trajectory so far and writes its next thought and action, which "
        "a panel of judge models labels for risk detection, action type and action safety.",
        "Separating safe fulfilment from blanket refusal: No-Safe-Path and Safe-Path items, many of them minimal "
        "pairs of opposite labels, show whether a model refuses only where no safe way to help exists.",
        "Studying how risk mechanisms (RS1-RS6) and scenario difficulty (SD1-SD5) change an agent's behaviour, "
        "through the controlled variations of each seed.",
    ]


def out_of_scope_uses() -> list[str]:
    return [
        "Training or fine-tuning a model on the items or their labels: the benchmark would no longer measure it.",
        "Commercial use: the data's licence (CC BY-NC-SA 4.0, after R-Judge) forbids it.",
        "Judging real people, organisations or deployed systems: the scenarios are emulated and the labels are "
        "relative to each item's reference risk rationale only.",
        "Certifying an agent as safe: a fixed prefix measures one next step, not a whole autonomous rollout.",
    ]


def biases(facts: dict) -> list[str]:
    return [
        "The seeds are one source (R-Judge) and one risk origin (unintended risks of ordinary tool use); "
        "intended attacks are outside this release.",
        f"Domains are unevenly represented ({facts['domains']}).",
        "Rewrites and labels come from a few language models, whose own judgments of risk shape which "
        "variations and pairs survive review.",
    ]


def limitations(facts: dict) -> list[str]:
    return [
        "Each item is a fixed prefix: it measures the next agent step, not a full autonomous rollout.",
        "Labels are the construction models' and were not checked by people row by row.",
        "Texts are English only." + (" This run is simulated: its rows are not a benchmark."
                                     if facts["simulated"] else ""),
    ]


def personal_information() -> str:
    return ("The trajectories come from R-Judge, which built them from emulated tool-use records (ToolEmu, "
            "InjecAgent, AgentMonitor) and expert-written cases; the names, e-mail addresses, account numbers and "
            "similar values in them belong to those scenarios and, as far as we know, to no real person. Nothing "
            "was collected from users for this release. Some scenarios describe harmful or sensitive actions "
            "(deleting data, sharing personal data, payments) because they test whether an agent avoids them.")


RJUDGE_BIBTEX = (
    "@inproceedings{yuan2024rjudge,\n  title = {R-Judge: Benchmarking Safety Risk Awareness for LLM Agents},\n"
    "  author = {Yuan, Tongxin and He, Zhiwei and Dong, Lingzhong and Wang, Yiming and Zhao, Ruijie and Xia, Tian "
    "and Xu, Lizhen and Zhou, Binglin and Li, Fangqi and Zhang, Zhuosheng and Wang, Rui and Liu, Gongshen},\n"
    "  booktitle = {Findings of the Association for Computational Linguistics: EMNLP 2024},\n"
    "  pages = {1467--1490},\n  year = {2024},\n  doi = {10.18653/v1/2024.findings-emnlp.79}\n}")


def citation() -> str:
    """BibTeX: this release (its version and date; the contributors as its author, until the paper's
    authors are known), the paper it reproduces (its title only: the text this project works from names
    no authors or venue) and R-Judge, whose trajectories every row adapts."""
    key_version = RELEASE_VERSION.replace(".", "_")
    return (f"@misc{{aura_eval_release_{key_version},\n  title = {{AURA-Eval dataset, release {RELEASE_VERSION}}},\n"
            f"  author = {{{{{RELEASE_CREATOR}}}}},\n  year = {{{RELEASE_DATE[:4]}}},\n"
            f"  note = {{Built by the AURA-Eval reference implementation, version {RELEASE_VERSION}, "
            f"{RELEASE_DATE}}}\n}}\n"
            f"@misc{{aura_eval_paper,\n  title = {{{PAPER_TITLE}}},\n"
            f"  note = {{authors and venue not in the text this release was built from}}\n}}\n"
            + RJUDGE_BIBTEX)
