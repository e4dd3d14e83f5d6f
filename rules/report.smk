rule report:
    input:
        source="paper/report.qmd",
        reference=FILES["paper_numbers"],
        deviations="paper/deviations.md",
        files=report_inputs(),
    output:
        # the folder: report.html and the full CSVs it links (Snakemake's report keeps them beside it)
        report(directory("results/report"), htmlindex="report.html", caption="../paper/captions/report.rst",
               category=REPORT_CATEGORY, labels={"name": "report"}),
    log:
        "logs/report.log",
    params:
        simulated=simulated_run(),
        sources=report_sources(),
    conda:
        "../envs/aura.yaml"
    script:
        "../scripts/report.py"
