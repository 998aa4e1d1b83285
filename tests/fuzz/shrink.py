"""Reduce a failing program to a small one that fails the same way.

Works on any Python source through its AST, greedily: try one edit, keep it when the program
still fails with the same signature (see `signature`), and go on until no edit helps or the
budget is spent. Edits, biggest first:

* delete a statement (anywhere: module level, function and class bodies, blocks);
* replace an if/for/while/with/try by its body (or an if by its else branch);
* replace an expression by one of its sub-expressions (`a + b` -> `a`, `f(x)` -> `x`,
  `x.sin()` -> `x`);
* drop an element of a tuple/list/dict display or an argument of a call;
* make a number constant 0 or 1.

`shrink(source, still_fails)` returns the smallest source found; `still_fails(source)` is the
caller's test (usually: run it in a worker and compare signatures).
"""
from __future__ import annotations

import ast
import copy
import re
import time
import warnings
from typing import Callable, Iterator, Optional

Path = tuple          # ((field, index-or-None), ...) from the module node


def signature(category: str, message: str) -> str:
    """What must stay the same while shrinking, so that one bug does not turn into another: the
    category, and the exception type inside the engine (internal errors) or the kind of
    difference (mismatches: `requires_grad`, `Tensor-likes` (values), `shape`, `captured raised`...)."""
    first = message.strip().splitlines()[0] if message.strip() else ""
    if category == "internal-error" and "it runs eagerly." in first:
        rest = first.split("it runs eagerly.", 1)[1].strip()
        return f"{category}:{rest.split(':', 1)[0]}"
    if category == "mismatch:exception":            # who raised what, and what the other side did
        raised = re.findall(r"(captured|eager) raised (\w+)", first)
        returned = re.findall(r"but (captured|eager) returned", first)
        return f"{category}:{raised}:{returned}"
    if category.startswith("mismatch:"):
        parts = first.split(": ")
        detail = parts[2] if len(parts) > 2 else (parts[1] if len(parts) > 1 else "")
        return f"{category}:{' '.join(detail.split()[:1])}"
    return category


def _get(tree: ast.AST, path: Path):
    node = tree
    for field, index in path:
        node = getattr(node, field)
        if index is not None:
            node = node[index]
    return node


def _walk(node: ast.AST, path: Path = ()) -> Iterator[tuple[Path, ast.AST]]:
    yield path, node
    for field, value in ast.iter_fields(node):
        if isinstance(value, list):
            for i, child in enumerate(value):
                if isinstance(child, ast.AST):
                    yield from _walk(child, path + ((field, i),))
        elif isinstance(value, ast.AST):
            yield from _walk(value, path + ((field, None),))


_BODY_FIELDS = ("body", "orelse", "finalbody")


def _edits(tree: ast.Module) -> Iterator[Callable[[ast.Module], None]]:
    """Every candidate edit of `tree`, as a function applying it to a copy."""
    nodes = list(_walk(tree))
    # 1. statements: delete, or unwrap a compound statement
    for path, node in nodes:
        for field in _BODY_FIELDS:
            stmts = getattr(node, field, None)
            if not isinstance(stmts, list) or not stmts or not isinstance(stmts[0], ast.stmt):
                continue
            for i in reversed(range(len(stmts))):
                yield _delete_stmt(path, field, i)
    for path, node in nodes:
        if isinstance(node, (ast.If, ast.For, ast.While, ast.With, ast.Try)) and path:
            yield _unwrap(path, "body")
            if isinstance(node, (ast.If, ast.Try)) and node.orelse:
                yield _unwrap(path, "orelse")
            if isinstance(node, ast.Try):
                for h in range(len(node.handlers)):
                    yield _unwrap_handler(path, h)
    # 2. expressions: replace by a sub-expression
    for path, node in nodes:
        if not isinstance(node, ast.expr) or not path or isinstance(node, (ast.Name, ast.Constant)):
            continue
        if isinstance(getattr(_get(tree, path[:-1]), path[-1][0]), ast.expr_context):
            continue
        for sub_path, sub in _walk(node):
            if sub is node or not isinstance(sub, ast.expr) or len(sub_path) > 2:
                continue
            if isinstance(sub, ast.Starred) or sub_path[-1][0] in ("ctx", "func") and isinstance(sub, ast.Name):
                continue
            yield _replace(path, path + sub_path)
    # 3. displays and calls: drop an element or argument
    for path, node in nodes:
        for field in ("elts", "args", "keywords", "keys"):
            items = getattr(node, field, None)
            if isinstance(items, list) and items and isinstance(node, (ast.Tuple, ast.List, ast.Call, ast.Dict, ast.Set)):
                for i in reversed(range(len(items))):
                    yield _drop(path, field, i)
    # 4. constants
    for path, node in nodes:
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            for v in (0, 1):
                if node.value != v:
                    yield _constant(path, type(node.value)(v))


def _delete_stmt(path, field, i):
    def apply(tree):
        stmts = getattr(_get(tree, path), field)
        del stmts[i]
        if not stmts and field == "body":
            stmts.append(ast.Pass())
    return apply


def _unwrap(path, field):
    def apply(tree):
        parent = _get(tree, path[:-1])
        pfield, index = path[-1]
        stmts = getattr(parent, pfield)
        inner = getattr(stmts[index], field) or [ast.Pass()]
        stmts[index:index + 1] = inner
    return apply


def _unwrap_handler(path, h):
    def apply(tree):
        parent = _get(tree, path[:-1])
        pfield, index = path[-1]
        stmts = getattr(parent, pfield)
        stmts[index:index + 1] = stmts[index].handlers[h].body
    return apply


def _replace(path, sub_path):
    def apply(tree):
        sub = _get(tree, sub_path)
        parent = _get(tree, path[:-1])
        field, index = path[-1]
        if index is None:
            setattr(parent, field, sub)
        else:
            getattr(parent, field)[index] = sub
    return apply


def _drop(path, field, i):
    def apply(tree):
        node = _get(tree, path)
        del getattr(node, field)[i]
        if isinstance(node, ast.Dict):
            del node.values[i]
    return apply


def _constant(path, value):
    def apply(tree):
        _get(tree, path).value = value
    return apply


def _render(tree: ast.Module) -> Optional[str]:
    try:
        source = ast.unparse(ast.fix_missing_locations(tree)) + "\n"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")       # e.g. "'int' object is not callable" after an edit
            compile(source, "<shrink>", "exec")
        return source
    except (SyntaxError, ValueError, TypeError, AttributeError, IndexError):
        return None


def shrink(source: str, still_fails: Callable[[str], bool], *, max_tries: int = 600,
           max_seconds: float = 300.0, log: Optional[Callable[[str], None]] = None) -> str:
    """The smallest variant of `source` found for which `still_fails` holds."""
    best = ast.parse(source)
    best_source = source
    tries, start = 0, time.monotonic()
    while True:                                    # passes over all edits until one changes nothing
        improved, k = False, 0
        while True:
            edits = list(_edits(best))
            accepted = False
            for j in range(k, len(edits)):         # edits before k were tried on a larger program
                if tries >= max_tries or time.monotonic() - start > max_seconds:
                    return best_source
                candidate = copy.deepcopy(best)
                try:
                    edits[j](candidate)
                except (IndexError, AttributeError, TypeError):
                    continue
                text = _render(candidate)
                if text is None or len(text) >= len(best_source):
                    continue
                tries += 1
                if still_fails(text):
                    best, best_source, k, accepted, improved = ast.parse(text), text, j, True, True
                    if log:
                        log(f"  shrink: {len(text.splitlines())} lines after {tries} tries")
                    break
            if not accepted:
                break
        if not improved:
            return best_source
