"""The `dynamo-lite` command. Subcommands: `demo` (capture small models, print their graphs)."""
from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="dynamo-lite", description="Guarded graph capture for PyTorch.")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="capture a few small models and print their graphs and guards")
    args = parser.parse_args(argv)
    if args.command == "demo":
        from corpus.demo import main as demo
        demo()
    return 0


if __name__ == "__main__":
    sys.exit(main())
