"""Your site's SLURM profile and site config, made from the shipped template (which stays as it is).

    python -m aura_eval.tools.site_setup --partition P [--account A] [--status-command squeue]
                                         [--cache PATH] [--root .]

writes, under the checkout (`--root`):

- `profiles/site/config.yaml`: a copy of `profiles/slurm/config.yaml` with `<your-partition>` and
  `<your-account>` filled (without `--account`, the account line is left out: on a cluster without
  accounting the plugin cannot check one and stops), and `slurm-status-command: squeue` where asked
  (a cluster without slurmdbd, whose MinJobAge is above 180 s: docs/cluster.md);
- `config/site.yaml`: a config overlay holding `llm.cache`, the response cache's place on a local disk
  of this host (the driver host, where Snakemake and every model job run). By default
  `/var/tmp/<user>/aura-eval/responses.sqlite`; a path on a network file system (NFS, Lustre, GPFS,
  ...) is refused, as the workflow's start check would refuse it, before anything is written.

Both paths are ignored by git: they are this site's. Run it on the driver host (a login or service
node, under tmux or screen; not inside a batch job), then:

    snakemake --profile profiles/site --keep-going --configfile config/paper.yaml config/site.yaml

An existing file is replaced only with `--force`. Prints what it wrote; errors print one line, exit 1.
"""

from __future__ import annotations

import argparse
import getpass
import re
import sys
from pathlib import Path

import yaml

from aura_eval.llm.cache import CacheLocationError, check_cache_location

TEMPLATE = "profiles/slurm/config.yaml"
PROFILE = "profiles/site/config.yaml"
SITE_CONFIG = "config/site.yaml"
PARTITION, ACCOUNT = "<your-partition>", "<your-account>"


class SiteError(RuntimeError):
    pass


def default_cache() -> str:
    """A local disk of this host, this user's: /var/tmp survives a reboot, unlike /tmp on many hosts."""
    return f"/var/tmp/{getpass.getuser()}/aura-eval/responses.sqlite"


def profile_text(template: str, partition: str, account: str | None, status_command: str | None) -> str:
    """The template with the site's values: the placeholders filled, the account line dropped where
    there is none, the status command set where asked."""
    for name, value in (("partition", partition), ("account", account)):
        if value is not None and not re.fullmatch(r"[\w.@+-]+", value):
            raise SiteError(f"site_setup: {name} {value!r} is not a SLURM name")
    if PARTITION not in template or ACCOUNT not in template:
        raise SiteError(f"site_setup: {TEMPLATE} has no {PARTITION} or {ACCOUNT} placeholder to fill")
    lines = []
    for line in template.splitlines(keepends=True):
        if ACCOUNT in line and account is None:
            continue
        lines.append(line.replace(PARTITION, partition).replace(ACCOUNT, account or ""))
    text = ("# This site's copy of profiles/slurm/config.yaml, written by python -m aura_eval.tools.site_setup.\n"
            + "".join(lines))
    if status_command:
        text += f"slurm-status-command: {status_command}  # the site's status command (docs/cluster.md)\n"
    return text


def site_config_text(cache: str) -> str:
    return ("# This site's overlay (python -m aura_eval.tools.site_setup): name it after config/paper.yaml.\n"
            "# The response cache on a local disk of the driver host, where Snakemake and every model job run;\n"
            "# copy it back beside the results when the run ends (make pack takes a consistent copy).\n"
            + yaml.safe_dump({"llm": {"cache": cache}}, sort_keys=False))


def setup(root, partition: str, account: str | None = None, status_command: str | None = None,
          cache: str | None = None, force: bool = False) -> dict[str, Path]:
    """Write the site's profile and config under `root`; {what: path}."""
    root = Path(root)
    cache = cache or default_cache()
    if not Path(cache).is_absolute():
        raise SiteError(f"site_setup: --cache {cache} is not an absolute path: name a local disk of this host")
    try:
        check_cache_location(cache)
    except CacheLocationError as err:
        raise SiteError(f"site_setup: {err}") from None
    template = (root / TEMPLATE).read_text(encoding="utf-8")
    written = {"profile": root / PROFILE, "config": root / SITE_CONFIG}
    texts = {"profile": profile_text(template, partition, account, status_command),
             "config": site_config_text(cache)}
    for what, path in written.items():
        if path.exists() and not force and path.read_text(encoding="utf-8") != texts[what]:
            raise SiteError(f"site_setup: {path} exists and differs; --force replaces it")
    for what, path in written.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(texts[what], encoding="utf-8")
    return written  # the cache's folder is made by its first run


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m aura_eval.tools.site_setup",
                                     description="your site's SLURM profile and site config, from the template")
    parser.add_argument("--partition", required=True, help="the SLURM partition the cluster jobs go to")
    parser.add_argument("--account", help="the SLURM account to charge (leave out where the site has no accounting)")
    parser.add_argument("--status-command", choices=("sacct", "squeue"),
                        help="the plugin's status command; squeue on a cluster without accounting (docs/cluster.md)")
    parser.add_argument("--cache", help="the response cache on a local disk of this host (default "
                                        "/var/tmp/<user>/aura-eval/responses.sqlite)")
    parser.add_argument("--root", default=".", help="the checkout")
    parser.add_argument("--force", action="store_true", help="replace existing site files")
    args = parser.parse_args(argv)
    try:
        written = setup(args.root, args.partition, args.account, args.status_command, args.cache, args.force)
    except (SiteError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(f"wrote {written['profile']} and {written['config']}; run:\n  snakemake --profile profiles/site "
          f"--keep-going --configfile config/paper.yaml config/site.yaml")
    return 0


if __name__ == "__main__":
    sys.exit(main())
