"""The `inductor` backend: hand the graph to torch's own compiler (for comparison only).

This is the one place dynamo_lite may use torch._inductor; the import is lazy.
"""
from .registry import register_backend


@register_backend("inductor")
def inductor(gm, example_inputs):
    from torch._inductor.compile_fx import compile_fx
    return compile_fx(gm, example_inputs)


# Graphs for it keep Python ints and floats constant (dynamic scalars are not handed to torch's compiler).
inductor.accepts_scalar_inputs = False
