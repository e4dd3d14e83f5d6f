"""The archive's terms note (aura_eval.tools.pack.terms_note): the data's licence (CC BY-NC-SA 4.0 after R-Judge,
one definition with the card and the Croissant file), R-Judge's licence shipped when present and said absent
when not (the workflow round trip, tests/test_workflow_mock.py, checks what the archive holds)."""

from aura_eval.tools.pack import terms_note
from aura_eval.vocab import data_terms

CONFIG = {"models": {"judge": {"model": "openai/gpt-5.4"}, "sim": {"model": "aura_sim/agent"}}}


def test_the_note_declares_the_data_licence_with_attribution_to_r_judge():
    text = terms_note(CONFIG, ["rjudge/SOURCE.md"])
    assert data_terms() in text
    assert ("Creative Commons Attribution-NonCommercial-ShareAlike 4.0 International (CC-BY-NC-SA-4.0, "
            "https://creativecommons.org/licenses/by-nc-sa/4.0/)") in text
    assert "R-Judge: Benchmarking Safety Risk Awareness for LLM Agents" in text and "this release uses 4.0" in text


def test_a_licence_file_under_rjudge_dir_is_named_as_shipped():
    text = terms_note(CONFIG, ["rjudge/LICENSE", "rjudge/SOURCE.md"])
    assert "R-Judge's licence and source notes are shipped as rjudge/LICENSE, rjudge/SOURCE.md." in text
    assert "No licence file" not in text


def test_without_a_licence_file_the_note_says_so_and_names_the_source_note():
    text = terms_note(CONFIG, ["rjudge/SOURCE.md"])
    assert ("No licence file is present under the run's `rjudge_dir`; rjudge/SOURCE.md is shipped as R-Judge's "
            "source note, and R-Judge's own terms (https://github.com/Lordog/R-Judge) apply.") in text
    assert "(litellm providers: openai)" in text and "Simulated models in this run: sim" in text
