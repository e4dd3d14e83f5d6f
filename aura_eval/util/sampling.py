"""Deterministic stratified samples: proportional allocation by largest remainder, members
in a fixed hash order of their id (the action-only subset, the calibration and vendor-swap
samples)."""

from __future__ import annotations

from aura_eval.vocab import hash_rank


def allocate(sizes: dict, n: int) -> dict:
    """Split n over groups proportionally to `sizes` by largest remainder, capped at each size."""
    total = sum(sizes.values())
    if total == 0 or n <= 0:
        return {k: 0 for k in sizes}
    n = min(n, total)
    quotas = {k: n * v / total for k, v in sizes.items()}
    alloc = {k: min(int(q), sizes[k]) for k, q in quotas.items()}
    while sum(alloc.values()) < n:
        open_groups = [k for k in sizes if alloc[k] < sizes[k]]
        k = max(open_groups, key=lambda g: (quotas[g] - alloc[g], str(g)))
        alloc[k] += 1
    return alloc


def stratified_sample(rows: list[dict], n: int, balance: str, strata: str, key: str, salt: str) -> list[dict]:
    """n rows, split evenly over the values of `balance` (e.g. pair label), then
    proportionally over `strata` (e.g. dimension) within each; members in a fixed hash
    order of `key`. Deterministic; a group too small gives its rest to the others."""
    groups: dict = {}
    for row in rows:
        groups.setdefault(row.get(balance), []).append(row)
    target = min(n, len(rows))
    # An even split first (the odd one to the first group), then top up from groups with rows left.
    share = {g: min(len(v), target // len(groups) + (i < target % len(groups)))
             for i, (g, v) in enumerate(sorted(groups.items(), key=lambda kv: str(kv[0])))}
    for g in sorted(groups, key=str):
        share[g] = min(len(groups[g]), share[g] + target - sum(share.values()))
    chosen = []
    for g, members in groups.items():
        by_stratum: dict = {}
        for row in members:
            by_stratum.setdefault(row.get(strata), []).append(row)
        alloc = allocate({s: len(v) for s, v in by_stratum.items()}, share[g])
        for s, stratum_rows in by_stratum.items():
            ordered = sorted(stratum_rows, key=lambda r: hash_rank(str(r[key]), salt))
            chosen += ordered[: alloc[s]]
    return sorted(chosen, key=lambda r: str(r[key]))
