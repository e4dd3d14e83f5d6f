"""Rate limits across a run's jobs: shares as Snakemake resources, pacing inside a job, the threads a
model job reserves, and the stub provider's own rate limit."""

import asyncio
import multiprocessing
import time

import pytest
import yaml

from aura_eval.llm import ratelimit
from aura_eval.llm.client import ModelClient, litellm_module
from tests import timing
from aura_eval.llm.ratelimit import Pacer
from tests.test_llm_client import make_requests
from tests.workflow import scratch_copy, snakemake, suite_config


def acquisition_times(limits: dict, model: str, n: int, path, tokens: int = 1, pacers: int = 1) -> list[float]:
    """Seconds from the start at which each of `n` calls got through, spread over `pacers` pacers on
    one cache file (as many jobs)."""
    async def go():
        shared, loop = [Pacer(limits, path) for _ in range(pacers)], asyncio.get_running_loop()
        for pacer in shared:
            pacer.reserve({})  # opens the file first: a new cache file's setup is not what is timed
        start, times = loop.time(), []

        async def one(i):
            await shared[i % pacers].wait(model, tokens)
            times.append(loop.time() - start)

        await asyncio.gather(*(one(i) for i in range(n)))
        return sorted(times)

    return asyncio.run(go())


def window_counts(times: list[float], edges: list[float]) -> list[int]:
    return [sum(lo <= t < hi for t in times) for lo, hi in zip(edges, edges[1:])]


@pytest.mark.suite
@pytest.mark.serial
def test_pacer_keeps_calls_to_the_limit_per_window(tmp_path):
    # 300 a minute: a bucket of half a second's worth (2 calls) at once, then one every 0.2 s.
    # The windows' edges lie midway between the expected times (0, 0, 0.2, 0.4, ..., 2.6).
    times = acquisition_times({"rpm_openai": 300}, "openai/gpt-x", 15, tmp_path / "c.sqlite")
    assert window_counts(times, [0, 0.1, 1.1, 2.1, 9]) == [2, 5, 5, 3]


@pytest.mark.suite
@pytest.mark.serial
def test_jobs_on_one_cache_share_the_limit_and_take_what_is_left(tmp_path):
    # Three jobs' pacers on one file: together exactly the one job's schedule, not three times it;
    # and a job alone (the others finished) gets the whole limit, not a third.
    times = acquisition_times({"rpm_openai": 300}, "openai/gpt-x", 15, tmp_path / "c.sqlite", pacers=3)
    assert window_counts(times, [0, 0.1, 1.1, 2.1, 9]) == [2, 5, 5, 3]
    time.sleep(0.6)  # the bucket drains
    later = acquisition_times({"rpm_openai": 300}, "openai/gpt-x", 15, tmp_path / "c.sqlite")
    assert window_counts(later, [0, 0.1, 1.1, 2.1, 9]) == [2, 5, 5, 3]


def test_pacer_reserves_across_processes(tmp_path):
    # The buckets live in the file: a reservation made by one connection (another job) delays the next.
    path = tmp_path / "c.sqlite"
    first, second = Pacer({"rpm_openai": 60}, path), Pacer({"rpm_openai": 60}, path)
    assert first.reserve({"rpm_openai": 1}, now=100.0) == 0
    assert second.reserve({"rpm_openai": 1}, now=100.0) == pytest.approx(1.0)
    assert first.reserve({"rpm_openai": 1}, now=100.5) == pytest.approx(1.5)
    assert second.reserve({"rpm_openai": 1}, now=200.0) == 0  # idle since: empty again


@pytest.mark.suite
@pytest.mark.serial
def test_pacer_holds_a_large_call_until_the_tokens_beyond_the_bucket_drained(tmp_path):
    # 6,000 tokens a minute: 100 a second, a bucket of 50; a 250-token call gets through at 2.0 s.
    (t,) = acquisition_times({"tpm_openai": 6000}, "openai/gpt-x", 1, tmp_path / "c.sqlite", tokens=250)
    assert 1.95 <= t < 2.3
    assert acquisition_times({"tpm_openai": 6000}, "anthropic/claude", 3, tmp_path / "c.sqlite",
                             tokens=250) == pytest.approx([0, 0, 0], abs=0.05)  # not paced: another provider
    pacer = Pacer({"rpm_openai": 600, "tpm_openai": 6000}, tmp_path / "d.sqlite")
    assert pacer.reserve({"rpm_openai": 1, "tpm_openai": 250}, now=0.0) == pytest.approx(2.0)
    # the next call waits for the token bucket (empty at 2.5 s) to hold room for its 10 tokens: at 2.1 s
    assert pacer.reserve({"rpm_openai": 1, "tpm_openai": 10}, now=2.0) == pytest.approx(0.1)


def test_a_models_own_key_replaces_its_providers():
    limits = {"openai": {"rpm": 600, "tpm": 60000}, "openai/gpt-x": {"rpm": 60}}
    assert ratelimit.job_resources(["openai/gpt-x"], limits, 4) == {"rpm_openai_gpt_x": 60}
    assert ratelimit.job_resources(["openai/gpt-y", "anthropic/c"], limits, 4) == {"rpm_openai": 600,
                                                                                   "tpm_openai": 60000}
    pacer = Pacer({"rpm_openai_gpt_x": 60, "rpm_openai": 600, "tpm_openai": 60000}, None)
    assert pacer.governing("openai/gpt-x", "rpm") == "rpm_openai_gpt_x"
    assert pacer.governing("openai/gpt-x", "tpm") is None  # its own key sets no token limit
    assert pacer.governing("openai/gpt-y", "tpm") == "tpm_openai"
    assert pacer.governing("anthropic/c", "rpm") is None


def test_share_divides_the_limit_among_the_rules_jobs_on_that_key():
    limits = {"openai": {"rpm": 1000, "tpm": 90000}, "anthropic": {"rpm": 50}}
    peers = [["openai/a"]] * 12 + [["anthropic/b"]]
    assert ratelimit.job_resources(["openai/a"], limits, 4, peers) == {"rpm_openai": 250, "tpm_openai": 22500}
    assert ratelimit.job_resources(["anthropic/b"], limits, 4, peers) == {"rpm_anthropic": 50}  # the only one
    assert ratelimit.job_resources(["openai/a"], limits, 4, [["openai/a"]] * 3) == {"rpm_openai": 333,
                                                                                    "tpm_openai": 30000}
    assert ratelimit.share(3, 4) == 1  # never 0: every job can run
    assert ratelimit.global_resources(limits) == {"rpm_openai": 1000, "tpm_openai": 90000, "rpm_anthropic": 50}
    with pytest.raises(ValueError, match="'openai/gpt-4' and 'openai_gpt_4'"):
        ratelimit.global_resources({"openai/gpt-4": {"rpm": 1}, "openai_gpt_4": {"rpm": 2}})


def test_threads_by_model():
    assert ratelimit.job_threads(["openai/gpt-x", "anthropic/c"], 8) == 0
    assert ratelimit.job_threads(["aura_local/smollm2-135m-instruct"], 8) == 2
    assert ratelimit.job_threads(["aura_local/smollm2-135m-instruct", "openai/gpt-x"], 1) == 1
    assert ratelimit.job_threads(["aura_sim/agent"], 8) == 1
    # a replay generates nothing: the embedded model's jobs take one core each
    assert ratelimit.job_threads(["aura_local/smollm2-135m-instruct"], 8, replay=True) == 1
    assert ratelimit.job_threads(["openai/gpt-x"], 8, replay=True) == 0


def test_a_job_learns_the_whole_limits_of_its_shares():
    limits = {"openai": {"rpm": 1000, "tpm": 90000}, "anthropic": {"rpm": 50}}
    paced = ratelimit.pacing_resource({"rpm_openai": 250, "tpm_openai": 22500}, limits)
    assert paced == "rpm_openai:1000/tpm_openai:90000"
    resources = {"_cores": 0, "_nodes": 1, "tmpdir": "/tmp", "rpm_openai": 250, "tpm_openai": 22500,
                 ratelimit.NETWORK_JOBS: 1, ratelimit.PACING: paced}
    assert ratelimit.granted(resources) == {"rpm_openai": 1000, "tpm_openai": 90000}
    assert ratelimit.granted({"_cores": 1, ratelimit.PACING: ""}) == {}


@pytest.mark.suite
def test_stub_rate_limit_answers_429_with_retry_after(stub, llm_settings):
    stub.state.rate_limit(rpm=60, burst_s=1.0)  # a bucket of one call, one more a second
    llm_settings["max_retries"] = 0
    results = ModelClient(llm_settings, "t", progress=False).run(make_requests(stub, 2))
    assert sorted(r.status for r in results) == ["failed", "ok"]
    assert stub.state.rate_limited == 1 and stub.state.stats()["accepted"] == 1


@pytest.mark.suite
@pytest.mark.serial
def test_paced_client_stays_under_the_providers_limit(stub, llm_settings):
    stub.state.rate_limit(rpm=600, burst_s=1.0)
    stub.state.latency_s = 0.05
    litellm_module()  # its import (seconds) is not what is timed
    start = time.perf_counter()
    paced = ModelClient({**llm_settings, "rate_limits_paced": {"rpm_openai": 600}}, "t", progress=False)
    results = paced.run(make_requests(stub, 30))
    wall = time.perf_counter() - start
    assert [r.status for r in results] == ["ok"] * 30
    # At exactly the provider's rate, a stalled event loop (a busy machine) can still bunch two
    # sends into one instant; the half-second slack absorbs most, a retry the rest.
    assert stub.state.rate_limited <= 3
    # Half a second's worth (5) at once, then 10 a second: 2.5 s for the other 25. A 429 asks for
    # the next whole second (the stub rounds up), so each costs at most 1 s more.
    paced_s = (30 - 5) / 10
    assert paced_s <= wall < paced_s + stub.state.rate_limited * 1.0 + timing.CALLS_S
    paced_429s = stub.state.rate_limited
    unpaced = ModelClient({**llm_settings, "max_retries": 0}, "t", progress=False).run(
        make_requests(stub, 30, model="openai/other"))
    failed = sum(r.status == "failed" for r in unpaced)
    assert failed == stub.state.rate_limited - paced_429s >= 15  # 8 in flight at 0.05 s: 160 a second offered


def _paced_job(settings: dict, api_base: str, model: str, barrier, results) -> None:
    """One model job in its own process: litellm loaded, then 20 calls once every job is ready."""
    from types import SimpleNamespace

    litellm_module()
    client = ModelClient(settings, model, progress=False)
    barrier.wait(timeout=120)
    results.put([r.status for r in client.run(make_requests(SimpleNamespace(api_base=api_base), 20, model=model))])


# e2e (issue 32: make test stays within 5 minutes): two spawned processes each import litellm
@pytest.mark.e2e
@pytest.mark.serial
@pytest.mark.parametrize("one_cache", [True, False])
def test_jobs_in_separate_processes_stay_under_the_limit_together(stub, llm_settings, tmp_path, one_cache):
    # Two jobs, each told the whole 600 a minute (10 a second; the provider's bucket holds 10).
    # On one cache file they share one bucket: 40 calls go at 10 a second between them, and the
    # provider answers (almost) no 429. On two files (the control: two buckets) they offer 20 a
    # second and the provider refuses about half of the excess.
    stub.state.rate_limit(rpm=600, burst_s=1.0)
    stub.state.latency_s = 0.05
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(2), ctx.Queue()
    settings = [{**llm_settings, "rate_limits_paced": {"rpm_openai": 600},
                 "cache": llm_settings["cache"] if one_cache else str(tmp_path / f"cache-{x}.sqlite")} for x in "ab"]
    jobs = [ctx.Process(target=_paced_job, args=(settings[i], stub.api_base, f"openai/stub-{x}", barrier, results))
            for i, x in enumerate("ab")]
    for job in jobs:
        job.start()
    statuses = [results.get(timeout=180) for _ in jobs]
    for job in jobs:
        job.join(timeout=60)
    if one_cache:
        assert statuses == [["ok"] * 20] * 2 and stub.state.stats()["accepted"] == 40
        # A process's first request (litellm setting up its HTTP client) can arrive late and bunch
        # with later ones; a retry (paced too) answers that.
        assert stub.state.rate_limited <= 3
    else:
        assert stub.state.rate_limited >= 8  # (some calls may fail after their retries)


def planned(work, *args) -> dict[str, list[dict]]:
    """{rule: [{"threads": n, resource: value, ...} per job]} of a dry run's job list."""
    dry = snakemake(work, "-n", *args)
    jobs, current = {}, None
    for line in dry.stdout.splitlines():
        if line.startswith(("rule ", "localrule ")):
            current = {"threads": 1}
            jobs.setdefault(line.split()[1].rstrip(":"), []).append(current)
        elif current is not None and line.strip().startswith("threads:"):
            current["threads"] = int(line.split(":")[1])
        elif current is not None and line.strip().startswith("resources:"):
            for pair in line.split(":", 1)[1].split(","):
                name, value = pair.strip().split("=")
                current[name] = int(value) if value.isdigit() else value
    return jobs


@pytest.mark.suite
def test_dry_run_plans_shares_threads_and_the_network_job_cap(tmp_path):
    work = scratch_copy(tmp_path)
    path = suite_config(work, "mock.yaml", "http://127.0.0.1:9/v1")
    config = yaml.safe_load(path.read_text())
    config["llm"]["rate_limits"] = {"openai": {"rpm": 600, "tpm": 100000}, "openai/stub-constructor": {"rpm": 60}}
    path.write_text(yaml.safe_dump(config))
    jobs = planned(work, "--configfile", str(path))

    def shares(rule):
        return [{k: v for k, v in job.items() if k.startswith(("rpm_", "tpm_", "network", "threads"))}
                for job in jobs[rule]]

    # Two runs (ReAct and action-only) share openai's limit; the tagger is its rule's only job.
    assert shares("rollout") == [{"threads": 0, "rpm_openai": 300, "tpm_openai": 50000, "network_model_jobs": 1}] * 2
    assert shares("tag_steps") == [{"threads": 0, "rpm_openai": 600, "tpm_openai": 100000, "network_model_jobs": 1}]
    # 2 runs x 3 judges: 6 jobs, fewer than llm.jobs_per_rate_limit (default 8): a sixth each.
    assert shares("judge_safety") == [{"threads": 0, "rpm_openai": 100, "tpm_openai": 16666,
                                       "network_model_jobs": 1}] * 6
    # The constructor's own key replaces openai's.
    assert shares("relevance") == [{"threads": 0, "rpm_openai_stub_constructor": 60, "network_model_jobs": 1}]
    assert shares("labels") == [{"threads": 1}] * 2  # not a model job: no share, one core
    # A total given on the command line wins, and the shares divide it.
    again = planned(work, "--configfile", str(path), "--resources", "rpm_openai=100")
    assert {job["rpm_openai"] for job in again["judge_safety"]} == {16}
    # Every job learns the whole limits it paces to (shared with the others), the override included.
    assert {job[ratelimit.PACING] for job in jobs["judge_safety"]} == {"rpm_openai:600/tpm_openai:100000"}
    assert {job[ratelimit.PACING] for job in jobs["relevance"]} == {"rpm_openai_stub_constructor:60"}
    assert {job[ratelimit.PACING] for job in again["judge_safety"]} == {"rpm_openai:100/tpm_openai:100000"}


@pytest.mark.suite
def test_embedded_model_jobs_keep_their_threads(tmp_path):
    work = scratch_copy(tmp_path)
    jobs = planned(work)  # the default config: every model is the embedded one
    assert {job["threads"] for rule in ("tag_steps", "rollout", "judge_detection_type") for job in jobs[rule]} == {2}
    assert not any(name.startswith(("rpm_", "network", ratelimit.PACING)) for rule in jobs.values() for job in rule
                   for name in job)
    settings = yaml.safe_load((work / "config/config.yaml").read_text())
    settings["llm"]["replay"] = True
    (work / "replay.yaml").write_text(yaml.safe_dump(settings))
    replay = planned(work, "--configfile", "replay.yaml")  # it generates nothing: one core each
    assert {job["threads"] for rule in ("tag_steps", "rollout", "judge_detection_type") for job in replay[rule]} == {1}
