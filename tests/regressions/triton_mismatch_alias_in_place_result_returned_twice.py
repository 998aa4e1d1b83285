# dynamo_lite fuzz regression: program 27000345 of bench/fuzz.py --seed 27 --backend triton (TRITON_INTERPRET=1), shrunk from 60 to 19 lines
# failure: mismatch:alias: call 1 (make_inputs(0)): output aliasing (same input, shares storage with inputs, shares with output #) [((0,), (0,), None), ((), (), None), ((), (), 1), ((), (), None)] != eager [((0,), (0,), None), ((), (), None), ((), (), None)]
# cause: the remake of outputs viewing outputs (this session) turned an in-place op's result, returned twice, into two objects
# backend: triton
import torch

def f(x, n):
    tp1_m1 = (x @ x, torch)
    p2_m1, q3_m1 = tp1_m1
    p2_m1 += p2_m1
    return (p2_m1, tp1_m1)

def make_target():
    return f

def make_inputs(seed, device='cpu'):
    g = torch.Generator()

    def rand(*shape):
        return torch.randn(shape, generator=g)
    x = rand(3)
    n = 2
    return ((x, n), {})
