# The audit site (aura_eval.report.audit): a static, offline index of every released item and excluded
# candidate, one page per row, the stylesheet they share, and the rows behind each linked table cell.
rule audit_site:
    input:
        seeds=FILES["seeds"],
        tags=FILES["tags"],
        prefixes=FILES["prefixes"],
        variations=FILES["variations"],
        reviews=FILES["variation_reviews"],
        pool=FILES["pool"],
        pairs=FILES["pairs"],
        pair_reviews=FILES["pair_reviews"],
        dataset=FILES["dataset"],
        excluded=FILES["excluded"],
        rollouts=expand("results/rollouts/{run}.jsonl", run=runs()),
        judgments=expand("results/judgments/{run}/{judge}.jsonl", run=runs(), judge=judges()),
        labels=label_files(),
        calls=[log for log in call_logs() if not log.startswith("results/calls/reliability/")],
        frame=FILES["frame"],
        cells=[t.outputs("table")["cells"] for t in TABLES.values() if "cells" in t.formats],
        cell_tables=[t.outputs("table")["csv"] for t in TABLES.values() if "cells" in t.formats],
        # Figure 2, shown inline on the index, and what it shows (its caption names the record)
        running_example=FIGURES[vocab.RUNNING_EXAMPLE].outputs("figure")["svg"],
        running_example_shown=FIGURES[vocab.RUNNING_EXAMPLE].outputs("figure")["json"],
    output:
        # index.html, audit.css, items/ (a page per row) and cells/ (the rows behind each table cell)
        site=report(directory("results/audit"), htmlindex="index.html", caption="../paper/captions/audit.rst",
                    category=REPORT_CATEGORY, labels={"name": "audit site"}),
    log:
        "logs/audit_site.log",
    conda:
        "../envs/aura.yaml"
    script:
        "../scripts/audit_site.py"
