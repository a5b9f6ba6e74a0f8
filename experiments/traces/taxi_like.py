"""Write `nyc-taxi-like-2days.csv`: a stand-in for Gesscale's NYC taxi trace (Arkian et al. 2021, sec. V-A b).

The paper replays the first two days of May 2013 (a Wednesday and a Thursday) of the NYC taxi
data set at SpeedFactor 10. The data set is not in this repository, so this is its shape only: a
weekday's pickups per hour relative to the day's peak as the city's published hourly profile
shows it - lowest around 5 am, a morning rise to a plateau, a dip at the 4 pm shift change, the
evening peak around 7 pm, a slow decline after 10 pm - with the second day's evening slightly
higher, one row per 10 minutes of the trace's own time, +-4 % seeded noise per row, scaled so the
peak needs about seven replicas of the `hotspot` operator (100,000 records/s each), and 30
minutes of silence at the end, so the backlog of every autoscaler can drain (the paper's excess
time is measured after "the incoming workload dropped to zero at the end of the trace").

Run from the repository root: `python experiments/traces/taxi_like.py`.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

# pickups per hour relative to the day's peak (hour 0 .. 23), a weekday
HOURLY = [0.62, 0.46, 0.34, 0.25, 0.19, 0.17, 0.33, 0.55, 0.68, 0.70, 0.66, 0.68,
          0.72, 0.71, 0.74, 0.72, 0.60, 0.72, 0.92, 1.00, 0.93, 0.90, 0.90, 0.80]
PEAK = 580_000.0  # records/s
ROW_S = 600.0  # one row per 10 minutes of the trace's time
TAIL_ROWS = 3  # 30 minutes without input


def rows(seed: int = 20130501) -> list[float]:
    rng = np.random.default_rng(seed)
    out = []
    for day in range(2):
        for k in range(int(24 * 3600 / ROW_S)):
            hour = (k + 0.5) * ROW_S / 3600.0
            # linear between hour centres, wrapping around midnight
            x = hour - 0.5
            lo = int(np.floor(x)) % 24
            frac = x - np.floor(x)
            level = (1 - frac) * HOURLY[lo] + frac * HOURLY[(lo + 1) % 24]
            if day == 1 and hour >= 17:
                level *= 1.05
            out.append(PEAK * level * (1 + rng.uniform(-0.04, 0.04)))
    return out + [0.0] * TAIL_ROWS


def main() -> None:
    path = Path(__file__).with_name("nyc-taxi-like-2days.csv")
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["rate"])
        for r in rows():
            w.writerow([f"{r:.0f}"])
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
