"""The fixed corpus sample that CI runs, and how it is chosen from a full report.

CI has 90 minutes and no GPU, so it cannot run the whole corpus (hundreds of models, each against
TorchDynamo). Instead `tests/test_corpus_sample.py` runs a fixed sample of it under dynamo_lite
and checks each model against the figures stored in `tests/data/corpus_sample.json`: the result
is correct, and the graphs and breaks are no more than the stored dynamo_lite figures and no more
than TorchDynamo's (the stored TorchDynamo figures come from the same full run; CI never runs
TorchDynamo itself).

The sample is chosen by a rule, not by hand, from a full `--compare torch --json` report:

    python -m dynamo_lite_corpus.sample out/zoo.json --write tests/data/corpus_sample.json

For each suite, the models that both engines ran correctly are sorted by name and taken at even
spacing (`PER_SUITE` of them), skipping those whose run took longer than `MAX_MODEL_S` so the sample
fits CI's budget (and those whose eager call is slow: `MAX_EAGER_S`); every model tagged with an intended break kind is a candidate like any other.
Re-run it after a full report when the corpus or the engine changes what a sample model does.
"""
from __future__ import annotations

import argparse
import json
import sys

# models per suite (own + lib + zoos >= 60)
PER_SUITE = {"own": 14, "lib": 12, "timm": 12, "torchvision": 8, "hf": 14, "diffusers": 6}
MAX_MODEL_S = 8.0          # dynamo_lite's first call plus eager time, in the full run, per model
MAX_EAGER_S = 0.5          # and its eager call: far from the zoo builders' own time limits, which a loaded CI machine could cross
DATA = "tests/data/corpus_sample.json"


def _suite(row: dict) -> str:
    return row.get("suite") or "own"


def _cost(row: dict) -> float:
    dl = row.get("dl") or {}
    return (dl.get("first_call_s") or 0.0) + 4 * (row.get("eager_s") or 0.0)


def choose(rows: list[dict], per_suite: dict = PER_SUITE, max_model_s: float = MAX_MODEL_S) -> dict:
    """name -> stored figures, chosen from the rows of a full `--compare torch` report."""
    chosen = {}
    for suite, count in per_suite.items():
        candidates = sorted((r for r in rows if _suite(r) == suite and r.get("dl") and r.get("torch")
                             and r["dl"]["status"] == "ok" and r["torch"]["status"] == "ok"
                             and _cost(r) <= max_model_s and (r.get("eager_s") or 0.0) <= MAX_EAGER_S),
                            key=lambda r: r["name"])
        if not candidates:
            continue
        step = max(1, len(candidates) / count)
        picks = {candidates[int(i * step)]["name"]: candidates[int(i * step)]
                 for i in range(min(count, len(candidates)))}
        for name, r in picks.items():
            chosen[name] = {"suite": suite, "dl_graphs": r["dl"]["graphs"], "dl_breaks": r["dl"]["breaks"],
                            "dl_eager_frames": r["dl"]["eager_frames"], "torch_graphs": r["torch"]["graphs"],
                            "torch_breaks": r["torch"]["breaks"], "seconds": round(_cost(r), 2)}
    return chosen


def load(path: str = DATA) -> dict:
    with open(path) as f:
        return json.load(f)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dynamo_lite_corpus.sample", description=__doc__.splitlines()[0])
    parser.add_argument("report", help="a full report's --json file, made with --compare torch over all suites")
    parser.add_argument("--write", default=DATA, help=f"where to store the sample (default {DATA})")
    args = parser.parse_args(argv)
    with open(args.report) as f:
        data = json.load(f)
    if (data.get("options") or {}).get("compare") != "torch":
        print("the report must be made with --compare torch (the sample stores TorchDynamo's figures)", file=sys.stderr)
        return 2
    chosen = choose(data["models"])
    by_suite = {}
    for figures in chosen.values():
        by_suite[figures["suite"]] = by_suite.get(figures["suite"], 0) + 1
    with open(args.write, "w") as f:
        json.dump({"made_from": args.report, "python": data.get("python") or "3.12",
                   "rule": {"per_suite": PER_SUITE, "max_model_s": MAX_MODEL_S, "max_eager_s": MAX_EAGER_S},
                   "models": chosen}, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"{len(chosen)} models ({', '.join(f'{s} {n}' for s, n in by_suite.items())}), "
          f"~{sum(m['seconds'] for m in chosen.values()):.0f} s of dynamo_lite work, written to {args.write}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
