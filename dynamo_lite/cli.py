"""The `dynamo-lite` command: `report` (graph-break statistics over a corpus of models; `report
diff OLD.json NEW.json` compares two runs), `explain MODEL` (the full explain report of one corpus model) and `demo` (capture small models
and print their graphs)."""
from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:2] == ["report", "diff"]:          # `report diff OLD NEW`: compare two --json runs
        from .report_diff import main as diff
        return diff(argv[2:])
    parser = argparse.ArgumentParser(prog="dynamo-lite", description="Guarded graph capture for PyTorch.")
    sub = parser.add_subparsers(dest="command", required=True)
    report = sub.add_parser("report", help="run models eagerly and captured; report graphs, breaks and reasons",
                            epilog="`dynamo-lite report diff OLD.json NEW.json` compares two --json runs "
                                   "(exit status 1 on a regression)")
    report.add_argument("paths", nargs="*", help="Python files or folders registering models with "
                        "corpus.registry.model (default: the bundled corpus)")
    report.add_argument("--backend", default="eager", help="backend for captured graphs (default: eager)")
    report.add_argument("--compare", choices=["torch"], help="also run TorchDynamo in the same run")
    report.add_argument("--json", dest="json_path", help="write the full results to this file")
    report.add_argument("--jobs", type=int, default=1, help="models run in parallel (one process each)")
    report.add_argument("-k", dest="pattern", help="only models whose name or tag matches")
    report.add_argument("--timeout", type=float, default=120.0, help="seconds per model and engine")
    report.add_argument("--resume", dest="resume_path", metavar="FILE",
                        help="continue an earlier run from its --json file (results are written there as "
                             "models finish, unless --json names another file)")
    explain = sub.add_parser("explain", help="run one corpus model under dynamo_lite.explain and print the report")
    explain.add_argument("model", help="a corpus model name (see `dynamo-lite report --list`)")
    explain.add_argument("--backend", default="eager", help="backend for captured graphs (default: eager)")
    explain.add_argument("--json", dest="json_path", help="also write the report's JSON to this file")
    report.add_argument("--list", action="store_true", help="list the models (name, tags) and exit")
    sub.add_parser("demo", help="capture a few small models and print their graphs and guards")
    args = parser.parse_args(argv)
    if args.command == "report" and args.list:
        from corpus.registry import all_models
        for entry in all_models(args.pattern):
            skip = entry.skip_reason()
            print(f"{entry.name:28s} {' '.join(entry.tags):40s} {('(skipped: ' + skip + ')') if skip else ''}")
        return 0
    if args.command == "explain":
        return _explain(args.model, args.backend, args.json_path)
    if args.command == "report":
        from .report import ReportOptions, run_report
        return run_report(ReportOptions(tuple(args.paths), args.backend, args.compare, args.jobs, args.pattern,
                                        args.timeout, args.json_path, args.resume_path))
    from corpus.demo import main as demo
    demo()
    return 0


def _explain(name: str, backend: str, json_path) -> int:
    import torch
    import dynamo_lite as dl
    from corpus.registry import MissingDependency, all_models
    entries = {e.name: e for e in all_models()}
    if name not in entries:
        close = [n for n in entries if name in n]
        print(f"dynamo-lite explain: no corpus model {name!r}" + (f"; did you mean {', '.join(close[:5])}?" if close
                                                                  else "; `dynamo-lite report --list` lists them"),
              file=sys.stderr)
        return 2
    try:
        example = entries[name].build()
    except MissingDependency as e:
        print(f"dynamo-lite explain: {e}", file=sys.stderr)
        return 2
    from corpus.survey import warm_up
    warm_up(False)         # one-off imports and initialisation stay out of the capture time shown
    torch.manual_seed(0)
    with torch.no_grad():
        report = dl.explain(example.model, backend=backend)(*example.args, **example.kwargs)
    from rich.console import Console
    Console().print(report)
    if json_path:
        with open(json_path, "w") as f:
            f.write(report.to_json())
    return 0


if __name__ == "__main__":
    sys.exit(main())
