rule report:
    input:
        source="paper/report.qmd",
        files=report_inputs(),
    output:
        "results/report/report.html",
    log:
        "logs/report.log",
    params:
        simulated=simulated_run(),
    conda:
        "../envs/aura.yaml"
    script:
        "../scripts/render_report.py"
