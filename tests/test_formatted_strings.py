"""f-strings with tensors among their fields (values/strings.py): not formatted while tracing, so
a message built for a check that passes costs no graph break (transformers'
`torch_compilable_check(cond, f"... {n_tokens} ...")`); a string that outlives the graph is
formatted after it from the tensors' values, and anything that needs its characters while tracing
breaks there. Differential throughout (harness.check: values, printed output, mutated inputs)."""
import pytest
import torch

from harness import Graphs, check

WHY = "TorchDynamo formats the tensor lazily too, or breaks where we do"


def _require(cond, message):
    if not isinstance(message, str):
        raise TypeError("message must be a str")
    return cond


def message_never_read(x):
    n = x.sum()
    _require(n, f"features do not match: tokens {n}, features {x.shape[0]}")
    return x * 2


def returned(x):
    n = x.sum()
    return x * 2, f"sum={n!r:>24}|{x.shape}|{n:.3f}"


def written_after(x):
    n = x.sum()
    s = f"sum={n}"
    n.add_(1)                    # the string says what n was when it was formatted
    return s, n


def compared(x):
    n = x.amax()
    s = f"max={n}"
    if s == "max=1.0":
        return x
    return x + 1, s + "!"


class Log:
    last = ""


LOG = Log()


def stored(x):
    n = x.mean()
    LOG.last = f"mean {n}"
    return x - n


def live_at_a_break(x):
    s = f"first {x[0]!s}"
    print("between")
    return x.cos(), s


def with_grad(w):
    y = (w * 3).sum()
    return y, f"{y!r}"           # its grad_fn is part of the text


@pytest.mark.parametrize("fn, graphs", [(message_never_read, 1), (returned, 1), (with_grad, 1),
                                        (live_at_a_break, 2)])
def test_formatted_after_the_graph(fn, graphs):
    arg = torch.randn(3, requires_grad=True) if fn is with_grad else torch.randn(3)
    check(fn, arg, graphs=Graphs(dl=graphs, torch=None, why=WHY))


def test_a_string_stored_on_an_object_is_formatted_after_the_graph():
    x = torch.randn(3)
    stored(x)
    expected = LOG.last
    LOG.last = ""
    check(stored, x, graphs=1)
    assert LOG.last == expected and expected.startswith("mean ")


@pytest.mark.parametrize("fn", [written_after, compared])
def test_strings_whose_characters_are_needed_or_stale_break_and_stay_right(fn):
    check(fn, torch.ones(3), graphs=None)
    check(fn, torch.randn(3), graphs=None)
