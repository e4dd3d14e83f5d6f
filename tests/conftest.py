import os
import shutil
from pathlib import Path

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from tests.stub_server import StubServer  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def dummy_openai_key(monkeypatch):
    # The stub accepts any key; litellm's OpenAI client refuses to start without one.
    monkeypatch.setenv("OPENAI_API_KEY", "dummy-key-for-tests")


@pytest.fixture
def stub():
    with StubServer() as server:
        yield server


@pytest.fixture
def llm_settings(tmp_path):
    return {"cache": str(tmp_path / "cache.sqlite"), "replay": False,
            "concurrency": {"default": 8}, "max_retries": 3, "backoff_s": 0.01, "timeout_s": 5}


@pytest.fixture(scope="session")
def rjudge_dir():
    return ROOT / "data" / "raw" / "rjudge"


@pytest.fixture
def rjudge_copy(tmp_path, rjudge_dir):
    target = tmp_path / "rjudge"
    shutil.copytree(rjudge_dir, target)
    return target
