"""Library constructs that reach C code or torch internals from a forward: nn.RNN/LSTM/GRU (weak
references to their flat weights, `_VF.lstm`), custom torch.autograd.Function, weight_norm
parametrizations and numpy in forward. Each is checked against eager (values, and gradients where
a backward exists) with the graph count that shows the construct no longer breaks the graph."""
import copy

import pytest
import torch
import torch.nn as nn

from harness import CountingBackend, Graphs, assert_same, capture, check, check_state_change, reset


# -- recurrent modules -----------------------------------------------------------------------------

RNNS = {
    "lstm_2_layers": (lambda: nn.LSTM(4, 5, 2), lambda: (torch.randn(3, 2, 4),)),
    "lstm_with_state": (lambda: nn.LSTM(4, 5), lambda: (torch.randn(3, 2, 4), (torch.randn(1, 2, 5),
                                                                                 torch.randn(1, 2, 5)))),
    "lstm_proj": (lambda: nn.LSTM(4, 6, proj_size=3), lambda: (torch.randn(3, 2, 4),)),
    "gru_bidirectional_batch_first": (lambda: nn.GRU(4, 5, batch_first=True, bidirectional=True),
                                      lambda: (torch.randn(2, 3, 4),)),
    "gru_unbatched": (lambda: nn.GRU(4, 5), lambda: (torch.randn(3, 4), torch.randn(1, 5))),
    "rnn_relu": (lambda: nn.RNN(4, 5, nonlinearity="relu"), lambda: (torch.randn(3, 2, 4),)),
    "rnn_no_bias": (lambda: nn.RNN(4, 5, bias=False), lambda: (torch.randn(3, 2, 4),)),
}


@pytest.mark.parametrize("name", RNNS)
def test_recurrent_module_is_one_graph(name):
    make_module, make_inputs = RNNS[name]
    torch.manual_seed(0)
    check(make_module().eval(), *make_inputs(), graphs=Graphs(
        dl=1, torch=None, why="TorchDynamo's allow_rnn=False graph-breaks on nn.RNN modules"))


def test_lstm_gradients_match_eager():
    torch.manual_seed(0)
    eager = nn.LSTM(4, 5, 2)
    model = copy.deepcopy(eager)
    backend = CountingBackend()
    compiled = capture(model, backend=backend)
    x = torch.randn(3, 2, 4)
    for net, params in ((eager, eager), (compiled, model)):
        out, (h, c) = net(x)
        (out.sum() + h.pow(2).sum() + c.mean()).backward()
    assert backend.count == 1
    for (name, a), (_, b) in zip(eager.named_parameters(), model.named_parameters()):
        torch.testing.assert_close(b.grad, a.grad, msg=lambda m: f"{name}.grad: {m}")


def test_rnn_weight_replaced_between_calls():
    """`ref() is not weight` in _weights_have_changed is decided while tracing; replacing a
    parameter makes the weak reference stale, which the guard must see."""
    torch.manual_seed(0)
    gru = nn.GRU(4, 5)
    x = torch.randn(3, 2, 4)

    def change():
        gru.weight_hh_l0 = nn.Parameter(torch.randn(15, 5))

    check_state_change(lambda x: gru(x)[0], (x,), change, max_graphs=None)


def test_rnn_weight_updated_in_place_reuses_graph():
    torch.manual_seed(0)
    lstm = nn.LSTM(4, 5)
    x = torch.randn(3, 2, 4)

    def change():
        with torch.no_grad():
            lstm.weight_ih_l0.mul_(2)

    backend = check_state_change(lambda x: lstm(x)[0], (x,), change)
    assert backend.count == 1


def test_rnn_train_mode_recaptures():
    torch.manual_seed(0)
    lstm = nn.LSTM(4, 5, 2, dropout=0.0).eval()
    check_state_change(lambda x: lstm(x)[1][0], (torch.randn(3, 2, 4),), lambda: lstm.train())
