"""Headline tests: the three programs dynamo_lite must capture whole (one graph) and get right."""
import torch

from harness import capture, check, run
from models import MLP, TransformerBlock


def relu_matmul_sum(x, y):
    return torch.relu(x @ y + 1).sum(dim=-1)


def test_relu_matmul_sum_is_one_graph():
    result = check(relu_matmul_sum, torch.randn(3, 4), torch.randn(4, 5), graphs=1)
    assert result.eager.value.shape == (3,)
    # the single graph must actually contain the computation, not be an empty shell
    assert len(result.backend.call_nodes(0)) >= 3


def test_mlp_module_is_one_graph():
    result = check(MLP().eval(), torch.randn(2, 8), graphs=1)
    assert result.eager.value.shape == (2, 4)
    assert len(result.backend.call_nodes(0)) >= 5


def test_mlp_called_through_a_function_is_one_graph():
    mlp = MLP()

    def predict(x):
        return mlp(x).softmax(dim=-1)

    check(predict, torch.randn(3, 8), graphs=1)


def test_transformer_block_eval_is_one_graph():
    block = TransformerBlock().eval()
    result = check(block, torch.randn(2, 6, 16), graphs=1, rtol=1e-5, atol=1e-5)
    assert result.eager.value.shape == (2, 6, 16)
    assert len(result.backend.call_nodes(0)) >= 15


def test_transformer_block_is_causal_under_capture(backend):
    """Changing the last position must not change earlier outputs of the captured block."""
    block = TransformerBlock().eval()
    x = torch.randn(1, 5, 16)
    x2 = x.clone()
    x2[:, -1] += 1.0
    expected = run(block, (x2,)).unwrap()
    compiled = capture(block, backend=backend)
    a, b = compiled(x), compiled(x2)
    assert backend.count == 1
    torch.testing.assert_close(a[:, :-1], b[:, :-1])
    assert not torch.allclose(a[:, -1], b[:, -1])
    torch.testing.assert_close(b, expected, rtol=1e-5, atol=1e-5)
