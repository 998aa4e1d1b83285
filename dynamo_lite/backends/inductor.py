"""The `inductor` backend: hand the graph to torch's own compiler (for comparison only).

This is the one place dynamo_lite may use torch._inductor; the import is lazy.
"""
from .graph_checks import checking_after, checks_hoisted
from .registry import register_backend
from .replayed_views import views_replayed, with_views_replayed


@register_backend("inductor")
def inductor(gm, example_inputs):
    gm, replays = views_replayed(gm)          # outputs of unbind, split, ...: made again after the call
    return with_views_replayed(_compiled(gm, example_inputs), replays)


def _compiled(gm, example_inputs):
    from torch._inductor.compile_fx import compile_fx
    checked, checks = checks_hoisted(gm)
    if checked is None:              # let torch's compiler say what it makes of the checks
        return compile_fx(gm, example_inputs)
    compiled = compile_fx(checked, example_inputs)
    return compiled if checks is None else checking_after(compiled, checks)


# Graphs for it keep Python ints and floats constant (dynamic scalars are not handed to torch's compiler).
inductor.accepts_scalar_inputs = False
