"""The preflight (`python -m aura_eval preflight`, aura_eval.tools.preflight) against the
OpenAI-compatible stub (tests/stub_server.py), a closed port and the batch stub: one line per
model entry in use, OK or the problem with its fix, and exit 1 on any problem."""

import json
import socket
from pathlib import Path

import pytest
import yaml

from aura_eval.__main__ import main
from aura_eval.llm.types import Endpoint
from aura_eval.tools import preflight
from tests.batch_stub import BatchStub

# one request per entry through litellm to the stub or an emulator
pytestmark = pytest.mark.suite

KEY_ENV = "AURA_PREFLIGHT_CRED"
KEY = "preflight-credential-4242"
PRICE = {"input_per_mtok": 2.0, "output_per_mtok": 8.0}


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stub_entry(base: str, name: str, **extra) -> dict:
    return {"model": f"openai/{name}", "vendor": "stubvendor", "api_base": base, "api_key_env": KEY_ENV,
            "params": {"temperature": 0.0, "max_tokens": 200}, "price": PRICE, **extra}


@pytest.fixture
def config_path(stub, tmp_path, monkeypatch):
    """config/config.yaml with its entries pointed at the stub, one problem each."""
    monkeypatch.setenv(KEY_ENV, KEY)
    monkeypatch.delenv("AURA_PREFLIGHT_UNSET", raising=False)
    config = yaml.safe_load(Path("config/config.yaml").read_text(encoding="utf-8"))
    base = stub.api_base
    config["models"] |= {
        "smollm2-generator": stub_entry(base, "stub-good"),
        "smollm2-pair-generator": stub_entry(base, "stub-plain", structured_output=False),
        "smollm2-agent": stub_entry(base, "stub-refuses-key"),
        "smollm2-judge-1": stub_entry(base, "stub-unknown"),
        "smollm2-judge-2": stub_entry(base, "stub-no-schema"),
        "smollm2-judge-3": stub_entry(f"http://127.0.0.1:{closed_port()}/v1", "stub-gone"),
        "smollm2-judge-4": stub_entry(base, "stub-good", api_key_env="AURA_PREFLIGHT_UNSET"),
    }
    stub.state.script = {"stub-refuses-key": ["401"], "stub-unknown": ["404"], "stub-no-schema": ["400schema"]}
    path = tmp_path / "preflight.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_one_line_per_entry_and_exit_1_on_a_problem(config_path, stub, capsys):
    assert main(["preflight", "--configfile", str(config_path)]) == 1
    lines = capsys.readouterr().out.splitlines()
    port = lines[5].split("127.0.0.1:")[1].split("/")[0]
    assert lines[:6] == [
        ("smollm2 (aura_local/smollm2-135m-instruct): OK (embedded local model: answered in this process, no key, "
         "no request)"),
        ("smollm2-agent (openai/stub-refuses-key): key refused (AuthenticationError: OpenAIException - Incorrect "
         f"API key provided); fix: put a valid key for this provider in {KEY_ENV}"),
        "smollm2-generator (openai/stub-good): OK (answered, structured output accepted)",
        ("smollm2-judge-1 (openai/stub-unknown): unknown model (NotFoundError: OpenAIException - The model "
         "`stub-unknown` does not exist or you do not have access to it.); fix: correct the entry's model string "
         "(litellm's provider/name)"),
        ("smollm2-judge-2 (openai/stub-no-schema): structured output refused (BadRequestError: OpenAIException - "
         "Invalid parameter: 'response_format' of type 'json_schema' is not supported with this model.); fix: set "
         "structured_output: false in the entry"),
        (f"smollm2-judge-3 (openai/stub-gone): provider unreachable at http://127.0.0.1:{port}/v1 "
         "(InternalServerError: OpenAIException - Connection error.); fix: check the network, api_base, or that "
         "the server runs"),
    ]
    assert lines[6:] == [
        ("smollm2-judge-4 (openai/stub-good): key variable AURA_PREFLIGHT_UNSET is unset; fix: export "
         "AURA_PREFLIGHT_UNSET=<your key> (or name the variable that holds it in the entry's api_key_env)"),
        ("smollm2-judge-5 (aura_local/smollm2-135m-instruct): OK (embedded local model: answered in this process, "
         "no key, no request)"),
        "smollm2-pair-generator (openai/stub-plain): OK (answered)",
        # two answered requests of 11 tokens in and 5 out at 2 and 8 USD per million: $0.000124
        "preflight: 9 model entries, 5 with a problem; its requests cost $0.0001",
    ]
    sent = {r["model"]: r for r in stub.state.requests}
    assert sorted(sent) == ["stub-good", "stub-no-schema", "stub-plain", "stub-refuses-key", "stub-unknown"]
    assert sent["stub-good"]["max_tokens"] == preflight.MAX_TOKENS and sent["stub-good"]["temperature"] == 0.0
    assert sent["stub-good"]["response_format"]["json_schema"]["schema"]["required"]  # a real prompt's schema
    assert "response_format" not in sent["stub-plain"]  # structured_output: false
    assert KEY not in "\n".join(lines)


def test_all_ok_exits_0_and_the_forecast_prices_the_preflight(config_path, stub, capsys):
    config = yaml.safe_load(config_path.read_text())
    for name in ("smollm2-agent", "smollm2-judge-1", "smollm2-judge-2", "smollm2-judge-3", "smollm2-judge-4"):
        config["models"][name] = stub_entry(stub.api_base, "stub-good")
    stub.state.script = {}
    config_path.write_text(yaml.safe_dump(config))
    assert main(["preflight", "--configfile", str(config_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "preflight: 9 model entries, 0 with a problem; its requests cost $0.0004"
    assert len(stub.state.requests) == 7
    requests, usd, unpriced = preflight.estimate(yaml.safe_load(config_path.read_text()))
    assert (requests, unpriced) == (7, [])
    assert 7 * preflight.MAX_TOKENS * 8e-6 < usd < 7 * (2_000 * 2e-6 + preflight.MAX_TOKENS * 8e-6)


@pytest.mark.parametrize("provider", ["openai", "gemini"])
def test_the_batch_check_lists_a_batch_with_the_key(provider, monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    with BatchStub() as stub:
        endpoint = Endpoint(name="b", model=f"{provider}/stub-batch", api_base=stub.api_base, api_key_env=KEY_ENV,
                            batch=True)
        assert preflight._batch_check(endpoint, KEY) is None
        assert stub.state.keys_seen == {KEY}
        stub.state.refused_key = "4242"
        problem = preflight._batch_check(endpoint, KEY)
    error = "ClientError: 400 INVALID_ARGUMENT" if provider == "gemini" else "AuthenticationError: Error code: 401"
    assert problem.startswith(f"batch API refused the key ({error}")
    assert problem.endswith("; fix: a key with batch access, or batch: false") and KEY not in problem


def test_the_preflight_sends_what_the_run_sends_deepseek_json_object(monkeypatch):
    """The preflight builds its request as the run does (wire.completion_kwargs): DeepSeek, which refuses
    a json_schema response format, gets json_object with the schema in the prompt and answers OK."""
    from tests.emulators import EMULATORS

    schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
    monkeypatch.setenv("AURA_PREFLIGHT_DEEPSEEK", "emu-cred-5b1f2c3d4e")
    with EMULATORS["deepseek"]() as emulator:
        check = preflight.check_entry("ds", {"model": "deepseek/deepseek-v4-pro", "api_base": emulator.api_base,
                                             "api_key_env": "AURA_PREFLIGHT_DEEPSEEK", "params": {"temperature": 0.0}},
                                      schema)
        sent = emulator.state.requests[-1]["body"]
    assert check.ok and check.text == "OK (answered, structured output accepted)", check.text
    assert sent["response_format"] == {"type": "json_object"} and sent["max_tokens"] == preflight.MAX_TOKENS
    assert sent["messages"][-1]["content"].endswith("JSON schema: " + json.dumps(schema, sort_keys=True))
