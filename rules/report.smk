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
        "../scripts/report.py"
