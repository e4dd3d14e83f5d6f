"""The tables of model calls, the forecast and the cost band, as declared (calls.py builds them;
pandas-free: see aura_eval.artefact_registry)."""

from aura_eval.vocab import table

# What the forecast reads of the config (its tables rerun when one of these changes).
FORECAST_CONFIG = ("seeds", "llm", "models", "roles", "agents", "action_only", "reliability", "construction")

TABLES = (
    table("model_calls", ["calls"],
          "Model requests per stage and model: cache hits, outcomes, tokens and cost",
          not_items="it counts model requests; each is a row of the call logs under results/calls/"),
    table("run_summary", ["seeds", "calls"], "What was run", formats=("md",),
          config=("seeds", "models", "roles", "agents", "validation")),
    table("forecast_vs_actual", ["seeds", "calls"],
          "Per stage and model: the forecast before any call (`python -m aura_eval forecast`, from the config "
          "and the seeds: calls, tokens, dollars) beside the call logs (requests, calls sent in this run, tokens, "
          "the answers' cost and this run's spend); dollars are empty where the model is unpriced",
          config=FORECAST_CONFIG,
          not_items="it counts model requests, tokens and dollars; each request is a row of the call logs under "
                    "results/calls/"),
    table("forecast_bands", ["seeds", "calls"],
          "The cost band: per measure, the run's whole cost (paid plus what is left, `python -m aura_eval "
          "forecast`) as a band (low, point, high) made before any call and again from the files as they stood "
          "at each model stage's end, beside what the run paid; whether each band held the actual and narrowed; "
          "dollars over the priced models",
          config=FORECAST_CONFIG,
          not_items="it sums model answers, tokens and dollars; each answer is a row of the call logs under "
                    "results/calls/"),
)
