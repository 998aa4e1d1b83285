"""Differential fuzzing of dynamo_lite: random programs run eagerly and captured, compared.

    generator.py  random programs over tensors, as Python source text (seeded, reproducible)
    library.py    random "library-style" programs: user classes with dunders, descriptors,
                  dataclasses, collections, itertools, generators, partials, globals mutated
                  between calls (`bench/fuzz.py --style library`)
    compare.py    recursive comparison of two runs' values, inputs and aliasing
    oracle.py     one program: eager vs captured, three calls each (or the program's FUZZ_CALLS,
                  with its between_calls mutations) -> a Verdict
    worker.py     programs run in child processes, so crashes and hangs are caught and reported
    shrink.py     AST-based reduction of a failing program to a minimal one
    driver.py     run N programs, shrink and save failures as regression files, print counts

`bench/fuzz.py` is the command-line front end; `tests/test_fuzz.py` runs a few hundred programs
with a fixed seed and `tests/test_fuzz_regressions.py` replays `tests/regressions/*.py`.
"""
