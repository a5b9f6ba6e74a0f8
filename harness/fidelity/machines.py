"""Whether the sim's calibrated profile and the local runs it is compared with came from machines of the
same speed (pure).

A profile's costs are CPU-seconds per record on the machine that measured them; a local run today may run
on a machine several times faster or slower per CPU-second (3.3x between two sessions' machines), and then
a sim-vs-local difference is partly the machines'. Both record `harness.host_speed`'s probe (the profile in
its provenance, a local run in its host facts); this compares them and says so. It only reports: the sim's
costs are never rescaled by the probe (model, don't tune). Unknown stays unknown: a profile or run from
before the probe was recorded is "not measured", never a speed of 0.

The probe is not the whole story: on this shared machine q1's calibrated capacity moved by 10-15 % between
hours at an unchanged probe (docs/calibration-status.md, session 12), so the report also says how long before
(or after) the local runs each profile was measured.
"""

from __future__ import annotations

import datetime as dt
import statistics
from collections.abc import Sequence
from typing import Any

from harness.host_speed import UNIT, speed_ratio

TOLERANCE = 0.15  # machines whose probes differ by more than this fraction (either way) are flagged
SAME_HOUR_H = 1.0  # a profile measured further than this from the local runs gets the drift note
WARNING = "Warning:"


def _speed(value: Any) -> float | None:
    """A recorded probe, or None where none was recorded (never 0)."""
    return float(value) if isinstance(value, int | float) and value > 0 else None


def _local_speed(rec: Any) -> float | None:
    return _speed((rec.meta.get("host") or {}).get("speed_sha256_mb"))


def sim_costs(rec: Any) -> dict[str, Any]:
    """A sim run's record of where its costs came from (empty when it recorded none)."""
    return (rec.meta.get("backend") or {}).get("costs") or {}


def _profiles(sims: Sequence[Any]) -> dict[str, tuple[bool, float | None]]:
    """The sim runs' cost sources: source -> (calibrated, the profile's probe or None)."""
    out: dict[str, tuple[bool, float | None]] = {}
    for rec in sims:
        costs = sim_costs(rec)
        out[str(costs.get("source", "?"))] = (bool(costs.get("calibrated")), _speed(costs.get("host_speed_sha256_mb")))
    return out


def speed_lines(local: Sequence[Any], sims: Sequence[Any], tolerance: float = TOLERANCE) -> list[str]:
    """One line per cost source the sim runs used: the profile's probe against the local runs' (their median),
    flagged (starting with WARNING) when they differ by more than `tolerance`."""
    speeds = [s for s in (_local_speed(r) for r in local) if s is not None]
    lines = []
    if speeds:
        med = statistics.median(speeds)
        lines.append(f"local runs' host speed: median {med:.0f} {UNIT} (min {min(speeds):.0f}, max {max(speeds):.0f}, "
                     f"n = {len(speeds)} of {len(local)} runs)")
    else:
        med = None
        lines.append(f"local runs' host speed not measured (none of {len(local)} runs recorded it: made before "
                     "the probe was recorded)")
    for source, (calibrated, prof) in sorted(_profiles(sims).items()):
        if not calibrated:
            lines.append(f"sim costs {source}: first guess, no measured profile (no machine speed to compare)")
        elif prof is None:
            lines.append(f"sim costs {source}: profile speed not measured (profiles from before the probe was "
                         "recorded): it may come from a machine of another speed than the local runs")
        elif (ratio := speed_ratio(med, prof)) is None:
            lines.append(f"sim costs {source}: profile measured at {prof:.0f} {UNIT}; the local runs' speed is "
                         "not known, so the machines are not compared")
        else:
            if max(ratio, 1.0 / ratio) - 1.0 > tolerance:
                how = f"{ratio:.1f} x slower" if ratio > 1.0 else f"{1.0 / ratio:.1f} x faster"
                lines.append(f"{WARNING} the sim's profile was measured on a machine {how} than the local runs "
                             f"(profile {prof:.0f}, local median {med:.0f} {UNIT}; tolerance {tolerance:.0%}): "
                             f"its costs per record are that machine's (not rescaled), so sim vs local differences "
                             f"include the machines' ({source})")
            else:
                lines.append(f"sim costs {source}: profile measured at {prof:.0f} {UNIT}, local runs {med:.0f}: "
                             f"the same machine speed within {tolerance:.0%}")
    return lines


def _when(value: Any) -> dt.datetime | None:
    """An ISO 8601 time as recorded (a run's `started_at`, a profile's date), or None (not recorded)."""
    try:
        t = dt.datetime.fromisoformat(str(value)) if value else None
    except ValueError:
        return None
    return t.replace(tzinfo=dt.UTC) if t is not None and t.tzinfo is None else t


def age_lines(cells: Sequence[tuple[Sequence[Any], Sequence[Any]]]) -> list[str]:
    """One line per calibrated profile the sim runs used: how long before the first and the last local run of the
    cells that used it it was measured, with a note when that is more than `SAME_HOUR_H` (capacities drift
    between hours). `cells`: (local runs, sim runs) per cell."""
    at: dict[str, dt.datetime | None] = {}
    starts: dict[str, list[dt.datetime | None]] = {}
    for local, sims in cells:
        mine = set()
        for costs in (sim_costs(r) for r in sims):
            if costs.get("calibrated"):
                source = str(costs.get("source", "?"))
                at[source] = at.get(source) or _when(costs.get("calibrated_at"))  # any run that recorded it
                mine.add(source)
        cell_starts = [_when(r.meta.get("started_at")) for r in local]
        for source in mine:
            starts.setdefault(source, []).extend(cell_starts)
    lines = []
    for source in sorted(at):
        known = sorted(t for t in starts[source] if t is not None)
        measured = at[source]
        if measured is None or not known:
            what = "its measurement time" if measured is None else "the local runs' start times"
            lines.append(f"sim costs {source}: {what} not recorded, so how far apart they were is not known")
            continue
        hours = [(t - measured).total_seconds() / 3600.0 for t in (known[0], known[-1])]
        say = [f"{abs(h):.1f} h {'before' if h >= 0 else 'after'}" for h in hours]
        line = f"sim costs {source}: profile measured {say[0]} the first local run and {say[1]} the last"
        if len(known) < len(starts[source]):
            line += f" ({len(known)} of {len(starts[source])} local runs recorded their start)"
        if max(abs(h) for h in hours) > SAME_HOUR_H:
            line += (f" (more than {SAME_HOUR_H:g} h: capacities on this shared machine moved 10-15 % between hours "
                     "at an unchanged speed probe, so part of a difference may be the hour's)")
        lines.append(line)
    return lines
