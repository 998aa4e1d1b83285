"""`dynamo-lite report diff OLD.json NEW.json`: what changed between two `report --json` runs.

A model *regresses* when, under dynamo_lite, it became wrong or crashed (or timed out) where it
was correct, captures more graphs, breaks more, runs more frames eagerly, recaptures more on an
identical second call, or got slower in steady state. Steady-state time is compared relative to
the same run's eager time (the runs may come from different machines or loads), and only beyond
a factor (`--slowdown`, default 1.5) and a floor of absolute time (`--min-ms`, default 0.2 ms per
call), under which timings are noise. Improvements are listed too. Exit status: 1 when anything
regressed, so CI and users can gate on it; 2 when a file cannot be read.
"""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass

# per-model dynamo_lite counters where more is worse, with how a message names them
_COUNTS = (("graphs", "graphs"), ("breaks", "graph breaks"), ("eager_frames", "frames run eagerly"),
           ("recaptures", "recaptures on a second call"))


# what a model's dynamo_lite run can end as that is a failure of ours
_BAD = frozenset({"WRONG", "CRASH", "timeout"})


@dataclass
class Change:
    model: str
    what: str
    regression: bool


def load(path: str) -> dict[str, dict]:
    """The per-model rows of a `report --json` file, by model name."""
    with open(path) as f:
        data = json.load(f)
    if not isinstance(data, dict) or not isinstance(data.get("models"), list):
        raise ValueError(f"{path}: not a `dynamo-lite report --json` file (no 'models' list)")
    return {row["name"]: row for row in data["models"]}


def _outcome(row: dict) -> str:
    """'ok', or why the model has no dynamo_lite result worth comparing ('skipped', 'WRONG', ...)."""
    if row.get("status") != "ok":
        return row.get("status") or "missing"
    return (row.get("dl") or {}).get("status") or "missing"


def _steady_vs_eager(row: dict):
    dl, eager = (row.get("dl") or {}).get("steady_call_s"), row.get("eager_steady_s")
    return (dl / eager, dl) if dl and eager else (None, None)


def compare(old: dict[str, dict], new: dict[str, dict], slowdown: float = 1.5, min_ms: float = 0.2) -> list[Change]:
    changes = []
    for name in sorted(set(old) | set(new)):
        if name not in new:
            changes.append(Change(name, "not in the new run", False))
            continue
        if name not in old:
            changes.append(Change(name, f"new model ({_outcome(new[name])})", _outcome(new[name]) in _BAD))
            continue
        before, after = _outcome(old[name]), _outcome(new[name])
        if before != after:      # a model that became wrong, crashed or timed out regressed; skipped did not
            changes.append(Change(name, f"{before} -> {after}", after in _BAD))
            continue
        if after != "ok":
            continue
        o, n = old[name]["dl"], new[name]["dl"]
        for key, label in _COUNTS:
            a, b = o.get(key), n.get(key)
            if isinstance(a, int) and isinstance(b, int) and a != b:
                changes.append(Change(name, f"{label} {a} -> {b}", b > a))
        (r0, _), (r1, s1) = _steady_vs_eager(old[name]), _steady_vs_eager(new[name])
        if r0 and r1 and s1 * 1e3 >= min_ms:
            if r1 > r0 * slowdown:
                changes.append(Change(name, f"steady-state {r0:.2f}x -> {r1:.2f}x eager's time", True))
            elif r0 > r1 * slowdown:
                changes.append(Change(name, f"steady-state {r0:.2f}x -> {r1:.2f}x eager's time", False))
    return changes


def main(argv: list[str]) -> int:
    import argparse
    parser = argparse.ArgumentParser(prog="dynamo-lite report diff", description=__doc__.splitlines()[0])
    parser.add_argument("old", help="the earlier `report --json` file")
    parser.add_argument("new", help="the later `report --json` file")
    parser.add_argument("--slowdown", type=float, default=1.5,
                        help="steady-state time relative to eager must grow by more than this factor (1.5)")
    parser.add_argument("--min-ms", type=float, default=0.2,
                        help="ignore steady-state changes of models faster than this per call (0.2 ms)")
    args = parser.parse_args(argv)
    try:
        old, new = load(args.old), load(args.new)
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"dynamo-lite report diff: {e}", file=sys.stderr)
        return 2
    changes = compare(old, new, args.slowdown, args.min_ms)
    regressions = [c for c in changes if c.regression]
    for title, group in (("regressions", regressions), ("other changes", [c for c in changes if not c.regression])):
        if group:
            print(f"{title} ({len(group)}):")
            width = max(len(c.model) for c in group)
            for c in group:
                print(f"  {c.model:<{width}}  {c.what}")
    print(f"{len(set(old) & set(new))} models in both runs; {len(regressions)} regression(s), "
          f"{len(changes) - len(regressions)} other change(s)")
    return 1 if regressions else 0
