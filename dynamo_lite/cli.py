"""The `dynamo-lite` command: `report` (graph-break statistics over a corpus of models; `report
diff OLD.json NEW.json` compares two runs; `report html REPORT.json` writes the HTML page of one),
`explain MODEL` (the full explain report of one corpus model), `trace DIR` (the browsable pages
of a DYNAMO_LITE_TRACE directory) and `demo` (capture small models and print their graphs)."""
from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:2] == ["report", "diff"]:          # `report diff OLD NEW`: compare two --json runs
        from .report.diff import main as diff
        return diff(argv[2:])
    if argv[:2] == ["report", "html"]:          # `report html REPORT.json -o FILE`: the page of a --json run
        from .report.html import main as html
        return html(argv[2:])
    parser = argparse.ArgumentParser(prog="dynamo-lite", description="Guarded graph capture for PyTorch.")
    sub = parser.add_subparsers(dest="command", required=True)
    report = sub.add_parser("report", help="run models eagerly and captured; report graphs, breaks and reasons",
                            epilog="`dynamo-lite report diff OLD.json NEW.json` compares two --json runs "
                                   "(exit status 1 on a regression)")
    report.add_argument("paths", nargs="*", help="Python files or folders registering models with "
                        "dynamo_lite.report.registry.model (default: the bundled corpus)")
    report.add_argument("--backend", default="eager", help="backend for captured graphs (default: eager)")
    report.add_argument("--compare", choices=["torch"], help="also run TorchDynamo in the same run")
    report.add_argument("--json", dest="json_path", help="write the full results to this file")
    report.add_argument("--jobs", type=int, default=None, help="models run at once, one process each "
                        "(default 1; with --ray: at most this many Ray tasks in flight, each taking one CPU of "
                        "the cluster; default: as many as the cluster has CPUs)")
    report.add_argument("-k", dest="pattern", help="only models whose name or tag matches")
    report.add_argument("--timeout", type=float, default=120.0, help="seconds per model and engine")
    report.add_argument("--resume", dest="resume_path", metavar="FILE",
                        help="continue an earlier run from its --json file (results are written there as "
                             "models finish, unless --json names another file)")
    explain = sub.add_parser("explain", help="run one corpus model under dynamo_lite.explain and print the report")
    explain.add_argument("model", help="a corpus model name (see `dynamo-lite report --list`)")
    explain.add_argument("--backend", default="eager", help="backend for captured graphs (default: eager)")
    explain.add_argument("--json", dest="json_path", help="also write the report's JSON to this file")
    explain.add_argument("--no-grad", dest="grad", action="store_false",
                         help="call the model under torch.no_grad() (default: grad mode on, as `report` calls it, "
                              "so the graphs and breaks shown are the ones its row counts)")
    report.add_argument("--list", action="store_true", help="list the suites and their models and exit")
    report.add_argument("--suite", dest="suites", metavar="NAMES",
                        help="comma-separated suites of the bundled corpus: own, lib, timm, torchvision, hf, "
                             "diffusers, or all (default: own,lib)")
    report.add_argument("--html", dest="html_path", metavar="FILE",
                        help="also write a self-contained HTML report (charts, sortable table, each break explained)")
    report.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS",
                        help="spread the models over a Ray cluster: ADDRESS as ray.init takes it (auto, HOST:PORT, "
                             "ray://HOST:10001); a new local cluster of this machine's cores when omitted. Needs "
                             "pip install -r requirements/ray.txt -c requirements/ci.txt")
    trace = sub.add_parser("trace", help="write DIR/index.html: the browsable pages of a trace directory "
                                         "(a program run with DYNAMO_LITE_TRACE=DIR)")
    trace.add_argument("directory", help="the trace directory")
    sub.add_parser("demo", help="capture a few small models and print their graphs and guards")
    args = parser.parse_args(argv)
    if args.command == "report":
        from .report import registry
        try:
            suites = registry.parse_suites(args.suites)
        except ValueError as e:
            print(f"dynamo-lite report: {e}", file=sys.stderr)
            return 2
    if args.command == "report" and args.list:
        return _list(args.pattern, suites, args.paths)
    if args.command == "explain":
        return _explain(args.model, args.backend, args.json_path, args.grad)
    if args.command == "trace":
        return _trace(args.directory)
    if args.command == "report" and args.html_path:    # say so before the run, not after it
        from .report.html import PlotlyMissing, require_plotly
        try:
            require_plotly()
        except PlotlyMissing as e:
            print(f"dynamo-lite report: {e}", file=sys.stderr)
            return 2
    if args.command == "report":
        from .report import ALL_CPUS, ReportOptions, run_report
        jobs = args.jobs if args.jobs is not None else (ALL_CPUS if args.ray is not None else 1)
        return run_report(ReportOptions(tuple(args.paths), args.backend, args.compare, jobs, args.pattern,
                                        args.timeout, args.json_path, args.resume_path, suites, args.html_path,
                                        args.ray))
    from dynamo_lite_corpus.demo import main as demo
    demo()
    return 0


def _list(pattern, suites, paths) -> int:
    """`report --list`: each suite with its count of models (and how many are skipped here), then the models."""
    from .report import ReportOptions, _load_entries, registry
    try:
        entries = _load_entries(ReportOptions(paths=tuple(paths), pattern=pattern, suites=suites))
    except registry.CorpusNotInstalled as e:
        print(f"dynamo-lite report: {e}", file=sys.stderr)
        return 2
    by_suite: dict = {}
    for entry in entries:
        by_suite.setdefault(registry.suite_of(entry) or "files", []).append(entry)
    for entry in entries:
        skip = entry.skip_reason()
        print(f"{entry.name:40s} {' '.join(entry.tags):50s} {('(skipped: ' + skip + ')') if skip else ''}")
    print()
    for suite in (*suites, "files"):
        listed = by_suite.get(suite, [])
        if suite == "files" and not listed:
            continue
        missing = sum(1 for e in listed if e.skip_reason())
        doc = registry.SUITES[suite].doc if suite in registry.SUITES else "models of the files given"
        problem = registry.suite_problems.get(suite)
        print(f"suite {suite:12s} {len(listed):5d} models" + (f" ({missing} skipped: optional package missing)"
                                                                 if missing else "")
              + f"  {doc}" + (f"  [{problem}]" if problem else ""))
    print(f"total {len(entries)} models")
    return 0


def _trace(directory: str) -> int:
    from .trace_html import build
    try:
        path = build(directory)
    except (FileNotFoundError, NotADirectoryError) as e:
        print(f"dynamo-lite trace: {e}", file=sys.stderr)
        return 2
    print(path)
    return 0


def _explain(name: str, backend: str, json_path, grad: bool = True) -> int:
    import torch
    import dynamo_lite as dl
    from dynamo_lite.report.registry import SUITES, ModelSkipped, all_models, get
    try:
        entries = {name: get(name)}                 # the default suites first: no zoo package imported
    except KeyError:
        entries = {e.name: e for e in all_models(suites=tuple(SUITES))}
    if name not in entries:
        close = [n for n in entries if name in n]
        print(f"dynamo-lite explain: no corpus model {name!r}" + (f"; did you mean {', '.join(close[:5])}?" if close
                                                                  else "; `dynamo-lite report --list` lists them"),
              file=sys.stderr)
        return 2
    try:
        example = entries[name].build()
    except ModelSkipped as e:
        print(f"dynamo-lite explain: {e}", file=sys.stderr)
        return 2
    from dynamo_lite.report.survey import warm_up
    warm_up(False)         # one-off imports and initialisation stay out of the capture time shown
    torch.manual_seed(1234)                    # the report's seed (report.survey._call)
    with torch.set_grad_enabled(grad):
        report = dl.explain(example.model, backend=backend)(*example.args, **example.kwargs)
    from rich.console import Console
    Console().print(report)
    if json_path:
        with open(json_path, "w") as f:
            f.write(report.to_json())
    return 0


if __name__ == "__main__":
    sys.exit(main())
