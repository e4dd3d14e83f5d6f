# AURA-Eval: from raw R-Judge records to the report. See README.md and ../shared design notes.
from snakemake.utils import min_version

min_version("9.0")


# The default config only when no --configfile is given: a user's config file never inherits the
# embedded model's agents, models or roles (the schema's defaults fill what it leaves out); to add
# to the default, name both: `--configfile config/config.yaml my-model.yaml` (merged key by key).
# `--config key=value` overrides apply on top of whichever config is in use (Snakemake re-applies
# them after this).
if not workflow.overwrite_configfiles:

    configfile: "config/config.yaml"


# `snakemake --report report.zip`: this text, then our report, the audit site and every table and figure.
report: "paper/captions/workflow.rst"


include: "rules/common.smk"
include: "rules/seeds.smk"
include: "rules/prefixes.smk"
include: "rules/construct.smk"
include: "rules/dataset.smk"
include: "rules/evaluate.smk"
include: "rules/reliability.smk"
include: "rules/validation.smk"
include: "rules/analysis.smk"
include: "rules/audit.smk"
include: "rules/report.smk"


# Before the first job of a real run (a dry run makes no call, so needs no key, nor a cache): the
# keys, and the cache file once (its place, `PRAGMA quick_check`, a new file announced, a replay's
# file present and readable). Then Ctrl-C and SIGTERM write the run's stop mark before Snakemake's
# own handling, so running and queued model jobs send nothing more (aura_eval.llm.stop).
onstart:
    # Under the SLURM executor, before the first submission: can its status command see a job end?
    # (otherwise the plugin waits forever without a word: aura_eval.workflow.slurm_check)
    if workflow.executor_plugin.name == "slurm":
        problem = slurm_status_problem(workflow.executor_settings)
        if problem:
            raise WorkflowError(problem)
    stop.clear_mark()
    stop.install_run_handlers()
    try:
        check_keys(config, os.environ)
        if uses_cache():
            for note in check_at_start(
                config["llm"]["cache"],
                replay=bool(config["llm"].get("replay")),
                allow_network_fs=CALL_SETTINGS.cache_on_network_fs,
            ):
                print(note, file=sys.stderr)
    except (ConfigError, CacheLocationError, CacheError) as err:
        raise WorkflowError(str(err)) from None
    # A budget: what the run may still pay (the forecast's band and ceiling) against it, before any call.
    if config["llm"].get("budget_usd") is not None and not config["llm"].get("replay"):
        from aura_eval.analyze.forecast_text import budget_at_start

        print(budget_at_start(config), file=sys.stderr)
    # The config recorded with the results (results/run/config.yaml): what `make pack` packs and
    # `make forecast` forecasts when told no config, and what they compare a config they are told with.
    run_config.record(config, RUN_CONFIGFILES)
    run_started.append(time.time())


# The exit summary repeats every stage that asked and got no usable answer.
onsuccess:
    for problem in call_log_problems("results/calls"):
        print(f"WARNING: {problem}", file=sys.stderr)
    fold_cache_at_end()


# A failed run (with --keep-going, after every job it could run): how many calls failed, and that a
# plain rerun sends only those (every answer received is in the cache).
onerror:
    summary = failed_calls_summary("logs", since=run_started[0] if run_started else None)
    if summary:
        print(summary, file=sys.stderr)
    fold_cache_at_end()


rule all:
    input:
        get_final_output(),
    default_target: True
