"""Loading a script of bench/ as a module in tests (bench/ is not a package)."""
import importlib.util
import os
import sys


def bench_path(filename: str) -> str:
    return os.path.join(os.path.dirname(__file__), os.pardir, "bench", filename)


def load_bench(filename: str, name: str):
    path = bench_path(filename)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module          # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module
