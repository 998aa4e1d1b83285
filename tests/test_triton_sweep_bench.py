"""bench/triton_sweep.py's variants: parsed, applied for a block and undone (the GPU run itself
needs CUDA)."""
import pytest

import triton_env  # noqa: F401  (first: TRITON_INTERPRET must be set before triton loads)

from bench_loader import load_bench

sweep = load_bench("triton_sweep.py", "triton_sweep")


def test_a_variant_is_parsed_into_assignments():
    assert sweep.parse_variant("") == []
    assert sweep.parse_variant("settings.peel_tail=False, lower_reductions.SPLIT_OUTER_MAX_PROGRAMS=128") == [
        ("settings", "peel_tail", False), ("lower_reductions", "SPLIT_OUTER_MAX_PROGRAMS", 128)]


@pytest.mark.parametrize("text", ["peel_tail=False", "torch.x=1", "settings.peel_tail", "settings.x=not_a_literal"])
def test_a_malformed_variant_is_refused(text):
    with pytest.raises(ValueError):
        sweep.parse_variant(text)


def test_assignments_hold_inside_the_block_and_are_undone_after_it_even_on_error():
    from dynamo_lite.backends.triton import lower_reductions, settings
    before = (settings.peel_tail, lower_reductions.SPLIT_OUTER_MAX_PROGRAMS)
    with pytest.raises(RuntimeError):
        with sweep.assigned(sweep.parse_variant("settings.peel_tail=False,lower_reductions.SPLIT_OUTER_MAX_PROGRAMS=7")):
            assert (settings.peel_tail, lower_reductions.SPLIT_OUTER_MAX_PROGRAMS) == (False, 7)
            raise RuntimeError("a variant's run failed")
    assert (settings.peel_tail, lower_reductions.SPLIT_OUTER_MAX_PROGRAMS) == before


def test_a_name_the_module_lacks_is_an_error_not_a_silent_run_of_the_code_as_is():
    from dynamo_lite.backends.triton import settings
    with pytest.raises(AttributeError):
        with sweep.assigned([("settings", "peel_tail", False), ("settings", "no_such_setting", 1)]):
            pass
    assert settings.peel_tail is True


def test_wide_configs_of_looped_reductions_keep_the_kernels_block_bound(monkeypatch):
    import dataclasses
    from dynamo_lite.backends.triton import codegen, launch
    from dynamo_lite.backends.triton.codegen import KernelSource
    ks = KernelSource("k", "", ["a", "b"], "red", 8192, 32000, True, ["exp"], rblock_max=8192)
    tuned = launch.candidates(ks, interpret=False)
    wide = sweep.widened(ks, tuned)
    assert wide[:len(tuned)] == tuned and len(wide) > len(tuned)
    assert max(c["RBLOCK"] for c in wide) == 8192
    halved = dataclasses.replace(ks, rblock_max=4096)        # (a row only 4096 tiles: codegen._block_bound)
    assert max(c["RBLOCK"] for c in sweep.widened(halved, launch.candidates(halved, interpret=False))) == 4096
    monkeypatch.setattr(codegen, "LOOPED_RBLOCK_MAX", 1024)  # a kernel without a bound of its own: the module's
    unbound = dataclasses.replace(ks, rblock_max=0)
    assert max(c["RBLOCK"] for c in sweep.widened(unbound, launch.candidates(unbound, interpret=False))) == 1024
