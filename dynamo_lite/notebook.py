"""Jupyter integration: `%load_ext dynamo_lite`, then a `%%explain` cell runs the cell's code as
one captured function and displays its ExplainReport (rendered as HTML by the notebook)."""
from __future__ import annotations

import ast
import itertools
import linecache
import textwrap

_cells = itertools.count()


def _cell_function(cell: str, namespace: dict):
    """Turn a cell into a function (its last expression becomes the return value) whose source
    linecache knows, so reports can show the cell's lines."""
    tree = ast.parse(cell)
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        tree.body[-1] = ast.Return(tree.body[-1].value)
    body = ast.unparse(tree) or "pass"
    source = "def explained_cell():\n" + textwrap.indent(body, "    ") + "\n"
    filename = f"<explain-cell-{next(_cells)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), namespace)
    return namespace.pop("explained_cell")


def explain_cell(line: str, cell: str, namespace: dict):
    from .explain import explain
    backend = line.split("--backend", 1)[1].split()[0] if "--backend" in line else "eager"
    return explain(_cell_function(cell, namespace), backend=backend)()


def load_ipython_extension(ipython) -> None:
    def explain_magic(line, cell):
        """%%explain [--backend NAME]: capture the cell and show where it breaks and why."""
        return explain_cell(line, cell, ipython.user_ns)

    ipython.register_magic_function(explain_magic, magic_kind="cell", magic_name="explain")
