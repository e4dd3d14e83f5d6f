"""What serves the Snakefile: its config (`config`: defaults, canonical values, checks), its job plan
(`jobs`), the config recorded with the results (`run_config`) and the SLURM start check
(`slurm_check`). The tools that plan or check a run (the forecast, the preflight, pack) read them as
the Snakefile does.
"""
