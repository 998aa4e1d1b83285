"""The `dynamo-lite` command: `report` (graph-break statistics over a corpus of models) and
`demo` (capture small models and print their graphs)."""
from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="dynamo-lite", description="Guarded graph capture for PyTorch.")
    sub = parser.add_subparsers(dest="command", required=True)
    report = sub.add_parser("report", help="run models eagerly and captured; report graphs, breaks and reasons")
    report.add_argument("paths", nargs="*", help="Python files or folders registering models with "
                        "corpus.registry.model (default: the bundled corpus)")
    report.add_argument("--backend", default="eager", help="backend for captured graphs (default: eager)")
    report.add_argument("--compare", choices=["torch"], help="also run TorchDynamo in the same run")
    report.add_argument("--json", dest="json_path", help="write the full results to this file")
    report.add_argument("--jobs", type=int, default=1, help="models run in parallel (one process each)")
    report.add_argument("-k", dest="pattern", help="only models whose name or tag matches")
    report.add_argument("--timeout", type=float, default=120.0, help="seconds per model and engine")
    sub.add_parser("demo", help="capture a few small models and print their graphs and guards")
    args = parser.parse_args(argv)
    if args.command == "report":
        from .report import ReportOptions, run_report
        return run_report(ReportOptions(tuple(args.paths), args.backend, args.compare, args.jobs, args.pattern,
                                        args.timeout, args.json_path))
    from corpus.demo import main as demo
    demo()
    return 0


if __name__ == "__main__":
    sys.exit(main())
