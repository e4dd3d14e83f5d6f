"""The archive's terms note (aura_eval.tools.pack.terms_note): R-Judge's licence shipped when present, and said
absent when not (the workflow round trip, tests/test_workflow_mock.py, checks what the archive holds)."""

from aura_eval.tools.pack import terms_note

CONFIG = {"models": {"judge": {"model": "openai/gpt-5.4"}, "sim": {"model": "aura_sim/agent"}}}


def test_a_licence_file_under_rjudge_dir_is_named_as_shipped():
    text = terms_note(CONFIG, ["rjudge/LICENSE", "rjudge/SOURCE.md"])
    assert "its licence and source notes are shipped as rjudge/LICENSE, rjudge/SOURCE.md." in text
    assert "no licence file" not in text


def test_without_a_licence_file_the_note_says_so_and_names_the_source_note():
    text = terms_note(CONFIG, ["rjudge/SOURCE.md"])
    assert ("no licence file is present under the run's `rjudge_dir`, so rjudge/SOURCE.md is shipped as its "
            "source note and R-Judge's own terms (https://github.com/Lordog/R-Judge) apply.") in text
    assert "(litellm providers: openai)" in text and "Simulated models in this run: sim" in text
