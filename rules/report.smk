# The config file(s) of the run that renders the report, for its "What was run" section. Passed in
# the environment, not as a param: the file's name is provenance, so the same config under another
# name (or with its keys reordered) reruns nothing.
def _shown_path(path):
    """A config file as the report names it: relative to the working or the workflow's directory,
    else its name alone (never a machine path)."""
    for base in (os.getcwd(), os.path.dirname(workflow.basedir)):
        rel = os.path.relpath(path, base)
        if not rel.startswith(".."):
            return rel
    return os.path.basename(path)


os.environ["AURA_CONFIGFILES"] = os.pathsep.join(
    _shown_path(path) for path in (workflow.overwrite_configfiles or ["config/config.yaml"]))


def report_sources():
    """For each table, the intermediate files it was computed from (the report links them); lists
    sorted, so a reordered config gives the same value."""
    return {name: {entry: sorted(paths) if isinstance(paths, list) else paths
                   for entry, paths in artefact_inputs(spec).items()} for name, spec in TABLES.items()}


rule report:
    input:
        source="paper/report.qmd",
        reference="paper/reference_numbers.yaml",
        deviations="paper/deviations.md",
        files=report_inputs(),
    output:
        "results/report/report.html",
    log:
        "logs/report.log",
    params:
        simulated=simulated_run(),
        sources=report_sources(),
    conda:
        "../envs/aura.yaml"
    script:
        "../scripts/render_report.py"
