"""Checks on tensor values inside a graph (`assert` on a tensor, `torch._check_tensor_all`: nodes
that raise the program's exception, runtime.GRAPH_CHECKS) for backends that retrace the graph to
aten (triton, inductor): retracing would need each check's data-dependent truth value, so the
checks come out of the graph, their conditions become extra outputs, and they run right after the
compiled graph, in program order.

Only graphs that write nothing in place are rewritten: what runs after a failing check is then
pure work thrown away, as if it had not run.
"""
from __future__ import annotations

from typing import Callable

import torch
import torch.fx

from ..graph_builder import GraphBuilder
from ..runtime import GRAPH_CHECKS


def checks_hoisted(gm: torch.fx.GraphModule):
    """(graph without its checks, (its output count, [(check, its other arguments)])); (gm, None)
    where it has no checks; (None, why) where they cannot come out."""
    nodes = list(gm.graph.nodes)
    checks = [n for n in nodes if n.op == "call_function" and n.target in GRAPH_CHECKS]
    if not checks:
        return gm, None
    if any(GraphBuilder.writes_in_place(n) for n in nodes):
        return None, "a check on tensor values (assert, torch._check_tensor_all) in a graph that writes in place"
    graph = torch.fx.Graph()
    env: dict = {}
    count = 0
    for node in nodes:
        if node in checks:
            continue
        if node.op != "output":
            env[node] = graph.node_copy(node, lambda n: env[n])
            continue
        outputs = node.args[0]
        if not isinstance(outputs, (tuple, list)):
            return None, "a check on tensor values in a graph whose output is no tuple"
        count = len(outputs)
        kept = [env[a] if isinstance(a, torch.fx.Node) else a for a in outputs]
        graph.output(type(outputs)(kept + [env[c.args[0]] for c in checks]))
    return torch.fx.GraphModule(gm, graph), (count, [(c.target, c.args[1:]) for c in checks])


def checking_after(call: Callable, checks) -> Callable:
    """The compiled graph of `checks_hoisted`, followed by its checks in program order."""
    count, run_checks = checks

    def run(*args):
        out = call(*args)
        for (check, rest), cond in zip(run_checks, out[count:]):
            check(cond, *rest)
        return type(out)(out[:count]) if isinstance(out, tuple) else out[:count]
    return run
