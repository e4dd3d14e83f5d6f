"""The package's command line: `python -m aura_eval <command>`.

    python -m aura_eval cache explain <cache> <item id or key prefix> [--stage S] [--results DIR] [--logs DIR]
    python -m aura_eval cache check <cache>
    python -m aura_eval cache repair <cache>
    python -m aura_eval pack <out.tar.gz> [--configfile config/config.yaml [more.yaml ...]] [--root .]
    python -m aura_eval unpack <archive> <checkout dir> [--force] [--max-size 4GiB] [--max-files 100000]
    python -m aura_eval forecast [--configfile config/config.yaml [more.yaml ...]] [--root .] [--out results/forecast] [--no-results]
    python -m aura_eval pilot --seeds N [--configfile ...] [--dir pilot] [--yes] [--cores 2]
    python -m aura_eval status [--configfile config/config.yaml [more.yaml ...]] [--root .]
    python -m aura_eval preflight [--configfile config/config.yaml [more.yaml ...]]

`--configfile` takes several files, as Snakemake does (`--configfile A B`, or the flag repeated):
they are merged in order as Snakemake merges them (`workflow.config.merge_configs`), so the default
config plus one model file is forecast, preflighted and packed as the workflow runs it.

See `aura_eval.tools.cache_explain`, `aura_eval.tools.cache_repair`, `aura_eval.tools.pack`,
`aura_eval.analyze.forecast` and `aura_eval.tools.preflight`. Errors print one line and exit 1; `cache check`
also exits 1 on a damaged file, `preflight` on any model entry with a problem.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys

from aura_eval.workflow.config import DEFAULT_CONFIGFILE


CONFIGFILE_HELP = ("the run's config file(s), merged in order as Snakemake merges them (a list after the flag, "
                   "or the flag repeated); default " + DEFAULT_CONFIGFILE + " (pack and forecast: the config "
                   "recorded with the results, results/run/config.yaml, where a run recorded one)")


def _configfile_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--configfile", nargs="+", action="extend", metavar="FILE", help=CONFIGFILE_HELP)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m aura_eval", description="AURA-Eval's run artifacts.")
    commands = parser.add_subparsers(dest="command", required=True)
    cache = commands.add_parser("cache", help="the response cache")
    cache_commands = cache.add_subparsers(dest="cache_command", required=True)
    explain = cache_commands.add_parser("explain", help="why a request was or was not answered from the cache")
    explain.add_argument("cache", help="the cache file (llm.cache)")
    explain.add_argument("query", help="an item id, or the first hex digits of a cache key (the call log's key)")
    explain.add_argument("--stage", help="only call-log rows and misses of this stage")
    explain.add_argument("--results", default="results", help="the results folder whose calls/ to read")
    explain.add_argument("--logs", default="logs", help="the job logs' folder (where a replay logs its misses)")
    check = cache_commands.add_parser("check", help="rows, size and integrity of a cache file (read-only)")
    check.add_argument("cache", help="the cache file (llm.cache)")
    repair = cache_commands.add_parser("repair", help="salvage a damaged cache file: keep every intact answer, "
                                                      "move the damaged file aside")
    repair.add_argument("cache", help="the cache file (llm.cache); no run may be using it")
    pack = commands.add_parser("pack", help="a finished run as one .tar.gz with a MANIFEST of sha256 checksums")
    pack.add_argument("out")
    _configfile_option(pack)
    pack.add_argument("--root", default=".", help="the working directory of the run")
    unpack = commands.add_parser("unpack", help="verify an archive and place it in a checkout for a replay")
    unpack.add_argument("archive")
    unpack.add_argument("checkout")
    unpack.add_argument("--force", action="store_true", help="replace an earlier unpacked archive and differing "
                                                             "human-label files")
    unpack.add_argument("--max-size", default="4GiB", help="the most bytes the archive's files may unpack to: "
                                                           "bytes, or with a unit (500MiB, 8G, 10GB); default 4GiB")
    unpack.add_argument("--max-files", type=int, default=None, help="the most members the archive may hold "
                                                                     "(default 100000)")
    forecast = commands.add_parser("forecast", help="calls, tokens, dollars and wall time of a run, before any call")
    _configfile_option(forecast)
    forecast.add_argument("--root", default=".", help="the working directory of the run (its results/, raw data)")
    forecast.add_argument("--out", default="results/forecast", help="where forecast.csv and forecast.json go")
    forecast.add_argument("--no-results", action="store_true", help="read no intermediate file: the config only")
    pilot = commands.add_parser("pilot", help="the whole workflow on a few of the run's seeds (its own folder, the "
                                              "run's cache), then the full run's forecast from what it saw")
    _configfile_option(pilot)
    pilot.add_argument("--seeds", required=True, help="how many seeds the pilot runs (fewer than the run's)")
    pilot.add_argument("--dir", default="pilot", help="the pilot's working directory (default pilot/)")
    pilot.add_argument("--yes", action="store_true", help="pay without asking")
    pilot.add_argument("--cores", type=int, default=2, help="Snakemake's --cores for the pilot's run")
    pilot.add_argument("--root", default=".", help="the checkout (its Snakefile, prompts, data)")
    status = commands.add_parser("status", help="a run while it goes: answers paid, dollars, what is left (a band), "
                                                "the rate and the time left (reads only)")
    _configfile_option(status)
    status.add_argument("--root", default=".", help="the working directory of the run")
    preflight = commands.add_parser("preflight", help="one tiny request per model entry in use: OK, or what is "
                                                      "wrong and how to fix it (exit 1 on any problem)")
    _configfile_option(preflight)
    args = parser.parse_args(argv)
    told = getattr(args, "configfile", None)  # pack and forecast: none told, the config recorded with the results
    if hasattr(args, "configfile") and args.command != "pack":
        args.configfile = args.configfile or [DEFAULT_CONFIGFILE]
    if args.command in ("forecast", "preflight", "status", "pilot"):
        from aura_eval.workflow import run_config
        from aura_eval.workflow.config import ConfigError, complete_config, load_configs

        recorded = run_config.recorded_config(args.root) if args.command in ("forecast", "status") else None
        try:
            # The files' values as the workflow sees them: merged, the defaults of what they leave out filled in.
            if recorded is not None and not told:
                print(f"forecast: the config recorded with the results ({run_config.RUN_CONFIG})", file=sys.stderr)
            config, filled = complete_config(recorded.config if recorded is not None and not told
                                             else load_configs(args.configfile))
            found = run_config.differences(config, recorded.config) if recorded is not None and told else []
            if found:
                print("WARNING: forecast: " + run_config.mismatch_text(told, recorded, found), file=sys.stderr)
        except (OSError, ConfigError) as err:
            print(f"error: {err}", file=sys.stderr)
            return 1
        for line in filled:
            print(line, file=sys.stderr)
        from aura_eval.tools import preflight as pf

        if args.command == "preflight":
            checks = pf.run(config)
            sys.stdout.write(pf.report(config, checks))
            return 0 if all(c.ok for c in checks) else 1
        from aura_eval.analyze import forecast as fc
        from aura_eval.analyze import forecast_text

        if args.command == "status":
            sys.stdout.write(forecast_text.status_text(fc.forecast(config, root=args.root)))
            return 0
        if args.command == "pilot":
            from aura_eval.tools.pilot import PilotError, run as run_pilot

            try:
                seeds = int(args.seeds)
            except ValueError:
                print(f"error: --seeds must be a whole number of seeds, at least 1 (got {args.seeds!r})",
                      file=sys.stderr)
                return 1
            try:
                return run_pilot(config, seeds, folder=args.dir, root=args.root, yes=args.yes, cores=args.cores)
            except PilotError as err:
                print(f"error: {err}", file=sys.stderr)
                return 1
        result = fc.forecast(config, root=args.root, results=not args.no_results)
        sys.stdout.write(forecast_text.text(result))
        requests, usd, unpriced = pf.estimate(config)
        print(f"preflight (make preflight): {requests} requests, at most ${usd:.4f}"
              + (f" (unpriced: {', '.join(unpriced)})" if unpriced else ""))
        print("written: " + ", ".join(str(p) for p in forecast_text.write(result, args.out)))
        return 0
    from aura_eval.llm.cache import CacheError
    from aura_eval.tools.cache_repair import RepairError
    from aura_eval.tools.pack import PackError

    try:
        if args.command == "cache" and args.cache_command == "check":
            from aura_eval.tools.cache_repair import check as run_check

            text, intact = run_check(args.cache)
            sys.stdout.write(text)
            return 0 if intact else 1
        if args.command == "cache" and args.cache_command == "repair":
            from aura_eval.tools.cache_repair import repair as run_repair, repair_text

            sys.stdout.write(repair_text(run_repair(args.cache)))
            return 0
        if args.command == "cache":
            from aura_eval.tools.cache_explain import explain as run_explain

            text, found = run_explain(args.cache, args.query, stage=args.stage, results=args.results,
                                      logs=args.logs)
            sys.stdout.write(text)
            return 0 if found else 1
        if args.command == "pack":
            from aura_eval.tools.pack import pack as run_pack, run_configfiles

            configfiles, note = run_configfiles(args.configfile, root=args.root)
            if note:
                print(note, file=sys.stderr)
            done = run_pack(args.out, configfiles=configfiles, root=args.root)
            print(f"packed {done['files']} files ({done['cache_rows']} cached responses) into {args.out}: "
                  f"{done['bytes']:,} bytes")
            return 0
        from aura_eval.tools.pack import MAX_FILES, parse_size
        from aura_eval.tools.pack import unpack as run_unpack

        done = run_unpack(args.archive, args.checkout, force=args.force, max_size=parse_size(args.max_size),
                          max_files=MAX_FILES if args.max_files is None else args.max_files)
        # Every word below is this project's: of the archive only the file count and a commit's hex digits.
        print(f"verified {done['files']} files against the MANIFEST into {done['folder']} (code commit "
              f"{done['code_commit'] or 'not recorded'}); placed {len(done['labels'])} human-label files under "
              f"data/human/; replay offline with:\n  {done['replay']}\n"
              f"then compare: python -m aura_eval.tools.digest . | diff - packed/STABLE_DIGESTS.sha256")
        return 0
    except (PackError, RepairError, CacheError, OSError) as err:
        print("error: " + " ".join(str(err).split()), file=sys.stderr)  # one line, whatever the message holds
        return 1
    except sqlite3.Error as err:  # the cache commands' file: named, with what to do
        from aura_eval.llm.cache import cache_error

        print(f"error: {cache_error(args.cache, err)}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
