from snakemake.utils import validate


validate(config, schema="../schemas/config.schema.yaml")

DOMAINS = ["Application", "Finance", "IoT", "Program", "Web"]
# Stages whose jobs call models; each writes its call log to results/calls/<stage>.jsonl.
MODEL_STAGES = ["tag_steps"]


def rjudge_files():
    return expand(
        "{dir}/{domain}/{kind}.json",
        dir=config["rjudge_dir"],
        domain=DOMAINS,
        kind=["harmful", "benign"],
    )


def role_models(role):
    """The config entries of the model(s) a role names: a change to them reruns the role's jobs."""
    names = config["roles"][role]
    names = names if isinstance(names, list) else [names]
    return {name: config["models"][name] for name in names}


def call_logs():
    return expand("results/calls/{stage}.jsonl", stage=MODEL_STAGES)


def get_final_output():
    return ["results/report/report.html"]
