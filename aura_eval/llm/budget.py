"""`llm.budget_usd`: no new call once the run's spend would pass the budget.

The run's spend is the cost of every call sent through this cache file (`llm.cache`), by any
job, in any rerun: a table `spend` in the cache's SQLite file, one row per call sent, and its
running sum in `spend_total`. Cached
answers cost nothing; a new cache file starts a new run's spend.

The bound: before a call is sent, its estimated cost at most (prompt tokens counted, plus
`max_tokens` of output, at the model's price) is reserved in one `BEGIN IMMEDIATE`
transaction that also sums what is spent and reserved, so no two jobs can both take the last
dollars; after the answer the row is settled at the call's actual cost (0 for a failed call).
Spend therefore never passes the budget while each call costs at most its reservation; where
it costs more (a tokenizer that counts differently, a model without `max_tokens`, for which
`DEFAULT_OUTPUT_TOKENS` are reserved), the excess is bounded by the calls in flight. A job
killed mid-call leaves its reservations counted at their estimate (the safe side).
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from aura_eval.llm import pricing
from aura_eval.llm.cache import connect, names_the_file

DEFAULT_OUTPUT_TOKENS = 4096  # reserved for a model whose params set no max_tokens


def refusal_text(budget: float, spent: float) -> str:
    return f"budget of ${budget:.4f} reached: spent ${spent:.4f} (llm.budget_usd)"


class Budget:
    @names_the_file
    def __init__(self, path: str | Path, budget_usd: float):
        self.path = Path(path)
        self.budget = float(budget_usd)
        self._db = connect(Path(path))  # as the response cache: WAL, no fsync per commit
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS spend (id INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL,"
            " stage TEXT, model TEXT NOT NULL, reserved_usd REAL NOT NULL, cost_usd REAL, settled INTEGER NOT NULL,"
            " at TEXT NOT NULL)")
        # The running sum of `spend` (settled costs plus open reservations), so a check costs one
        # row read however many calls the run has made.
        self._db.execute("CREATE TABLE IF NOT EXISTS spend_total (id INTEGER PRIMARY KEY CHECK (id = 1),"
                         " spent_usd REAL NOT NULL)")
        self._db.execute("INSERT OR IGNORE INTO spend_total (id, spent_usd) VALUES (1, 0)")

    @classmethod
    def of(cls, cache_path, limit: float | None):
        """The run's budget (its spend kept in the cache file), or None when `llm.budget_usd` is not set."""
        return None if limit is None else cls(cache_path, limit)

    @names_the_file
    def spent(self) -> float:
        """Settled costs plus the reservations of calls in flight."""
        return self._db.execute("SELECT spent_usd FROM spend_total WHERE id = 1").fetchone()[0]

    @names_the_file
    def reserve(self, key: str, stage: str, model: str, estimate_usd: float) -> tuple[int | None, float]:
        """(reservation id, spend before it), or (None, spend) when the call would pass the budget."""
        self._db.execute("BEGIN IMMEDIATE")  # the check and the reservation as one, across processes
        try:
            spent = self.spent()
            if spent + estimate_usd > self.budget:
                return None, spent
            cur = self._db.execute(
                "INSERT INTO spend (key, stage, model, reserved_usd, cost_usd, settled, at) VALUES (?, ?, ?, ?, NULL, 0, ?)",
                (key, stage, model, estimate_usd, datetime.now(timezone.utc).isoformat(timespec="seconds")))
            self._db.execute("UPDATE spend_total SET spent_usd = spent_usd + ? WHERE id = 1", (estimate_usd,))
            return cur.lastrowid, spent
        finally:
            self._db.execute("COMMIT")

    @names_the_file
    def settle(self, reservation: int, cost_usd: float | None) -> None:
        """The call's actual cost (a failed call: 0; a cost litellm could not tell: the reservation)."""
        self._db.execute("BEGIN IMMEDIATE")
        try:
            (reserved,) = self._db.execute("SELECT reserved_usd FROM spend WHERE id = ? AND settled = 0",
                                           (reservation,)).fetchone() or (None,)
            if reserved is not None:
                cost = reserved if cost_usd is None else cost_usd
                self._db.execute("UPDATE spend SET cost_usd = ?, settled = 1 WHERE id = ?", (cost, reservation))
                self._db.execute("UPDATE spend_total SET spent_usd = spent_usd + ? WHERE id = 1", (cost - reserved,))
        finally:
            self._db.execute("COMMIT")


def estimate_usd(endpoint, prompt_tokens: int) -> float | None:
    """The most a call should cost: its prompt tokens and `max_tokens` of output at the model's
    price; None when the model is unpriced (a budgeted run refuses it: its cost is unknown)."""
    rates = pricing.endpoint_per_token(endpoint)
    if rates is None:
        return None
    out = int(endpoint.params.get("max_tokens") or DEFAULT_OUTPUT_TOKENS)
    return prompt_tokens * rates[0] + out * rates[1]
