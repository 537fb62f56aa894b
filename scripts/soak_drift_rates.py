"""How often the soak's drift rule (clusterbench.analyses.soak.drift.drift_of) calls a drift:
on flat series with normal noise (false alarms), on a steady fall and on a step (found), each over
1000 seeds, at the default thresholds.  The numbers quoted in analyses/soak/drift.py come from here.

    python scripts/soak_drift_rates.py
"""

from __future__ import annotations

import random

from clusterbench.analyses.soak.drift import Series, drift_of
from clusterbench.thresholds import Thresholds

SEEDS = 1000
LEVEL = 800.0


def _series(values: list[float]) -> Series:
    n = len(values)
    return Series(benchmark="gemm", metric="tflops", unit="TFLOP/s", params={}, host="h",
                  device="cuda:0", direction="higher", rounds=tuple(range(n)),
                  values=tuple(values), times=tuple(600.0 * k for k in range(n)))  # fmt: skip


def _base(kind: str, n: int) -> list[float]:
    if kind == "flat":
        return [LEVEL] * n
    if kind == "fall":  # 1.5% a round
        return [LEVEL * (1 - 0.015 * k) for k in range(n)]
    return [LEVEL if k < n // 2 else 0.9 * LEVEL for k in range(n)]  # a 10% step halfway


def rate(kind: str, n: int, noise: float) -> float:
    thresholds = Thresholds()
    hits = 0
    for seed in range(SEEDS):
        rng = random.Random(seed)
        values = [v * (1 + rng.gauss(0, noise)) for v in _base(kind, n)]
        d = drift_of(_series(values), thresholds)
        hits += d is not None and d.drifted
    return hits / SEEDS


def main() -> None:
    cases = [("flat", 6, 0.03), ("flat", 10, 0.03), ("flat", 20, 0.03), ("flat", 10, 0.02),
             ("flat", 10, 0.01), ("fall", 6, 0.01), ("fall", 10, 0.01), ("step", 10, 0.02),
             ("step", 20, 0.02)]  # fmt: skip
    for kind, n, noise in cases:
        print(f"{kind:<5} {n:>3} rounds, {noise:.0%} noise: drift in {rate(kind, n, noise):.1%}")


if __name__ == "__main__":
    main()
