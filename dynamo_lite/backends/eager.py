"""The `eager` backend: run the captured fx graph as Python, op by op."""
from .registry import register_backend


@register_backend("eager")
def eager(gm, example_inputs):
    return gm.forward
