"""Graph-capture coverage against TorchDynamo, measured in one run: for every corpus model (our own
models plus tiny Hugging Face transformers: GPT-2, BERT, Llama, T5, ViT, BART and more), graphs and
breaks under dynamo_lite and under torch.compile(backend=counting), and whether dynamo_lite's result
equals eager's.

    python bench/coverage.py [-k PATTERN] [--jobs N] [--json FILE]

Targets (issue 4): never a wrong result; graph count <= TorchDynamo's on every model.
"""
from __future__ import annotations

import argparse
import os
import sys

# bench/triton.py would shadow the triton package that torch.compile imports.
sys.path[:] = [p for p in sys.path if os.path.realpath(p or ".") != os.path.dirname(os.path.realpath(__file__))]
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.realpath(__file__))))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", dest="pattern")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--json", dest="json_path")
    args = parser.parse_args()
    from dynamo_lite.report import ReportOptions, _load_entries, _run_all, summary
    options = ReportOptions(compare="torch", jobs=args.jobs, pattern=args.pattern, json_path=args.json_path)
    entries = _load_entries(options)
    results = _run_all(entries, options)
    print(f"{'model':32} {'correct':>8} {'dl graphs':>10} {'dl breaks':>10} {'torch graphs':>13} "
          f"{'torch breaks':>13}  graphs<=torch")
    for r in results:
        dl, t = r.get("dl") or {}, r.get("torch") or {}
        ok = dl.get("status", r["status"])
        fewer = "yes" if dl and t and dl["graphs"] <= t["graphs"] else "-" if not (dl and t) \
            else "no (TorchDynamo captured nothing)" if t["graphs"] == 0 else "no"
        print(f"{r['name']:32} {ok:>8} {dl.get('graphs', '-'):>10} {dl.get('breaks', '-'):>10} "
              f"{t.get('graphs', '-'):>13} {t.get('breaks', '-'):>13}  {fewer}")
    info = summary(results, "torch")
    print(f"\nmodels {info['models']}: correct {info['correct']}, wrong {info['wrong']}; "
          f"graphs dynamo_lite {info['dl_graphs']} vs TorchDynamo {info.get('torch_graphs')}; "
          f"models with graphs <= TorchDynamo's: {info.get('models_with_fewer_or_equal_graphs')} of "
          f"{info.get('capture_ratio_models', 0)} where both ran")
    if args.json_path:
        import json
        with open(args.json_path, "w") as f:
            json.dump({"summary": info, "models": results}, f, indent=2, default=str)
    return 1 if info["wrong"] else 0


if __name__ == "__main__":
    sys.exit(main())
