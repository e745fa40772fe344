"""danlu's own surface: backend registry, modes, options, config and log topics."""

import logging

import pytest
import torch

import danlu
from danlu import logs


def test_builtin_backends_are_listed():
    assert {"eager", "aot_eager", "inductor"} <= set(danlu.list_backends())


def test_unknown_backend_names_the_valid_ones():
    with pytest.raises(
        ValueError, match=r"unknown backend 'nope'; valid backends: .*aot_eager.*eager.*inductor"
    ):
        danlu.compile(lambda x: x, backend="nope")


def test_unknown_mode_names_the_valid_ones():
    with pytest.raises(ValueError, match=r"unknown mode 'fast'.*'reduce-overhead'.*'max-autotune'"):
        danlu.compile(lambda x: x, mode="fast")


def test_mode_is_rejected_for_backends_without_modes():
    with pytest.raises(ValueError, match="inductor settings"):
        danlu.compile(lambda x: x, backend="eager", mode="max-autotune")


def test_compile_rejects_non_callables():
    with pytest.raises(TypeError, match="function or nn.Module"):
        danlu.compile(42)


def test_register_backend_as_decorator_and_plain_callable():
    calls = []

    @danlu.register_backend("recording_for_test")
    def recording(gm, example_inputs):
        calls.append(gm)
        return gm.forward

    assert "recording_for_test" in danlu.list_backends()
    from danlu.backends import lookup_backend

    assert lookup_backend("recording_for_test") is recording


def test_config_rejects_unknown_options_and_patches_temporarily():
    with pytest.raises(AttributeError, match="valid options: .*recompile_limit"):
        danlu.config.recompile_limt = 3
    before = danlu.config.recompile_limit
    with danlu.config.patch(recompile_limit=before + 5):
        assert danlu.config.recompile_limit == before + 5
    assert danlu.config.recompile_limit == before


def test_log_topics_enable_their_loggers_and_reject_typos():
    with pytest.raises(ValueError, match="valid topics"):
        logs.parse("graph_breaks,recompile")
    try:
        danlu.config.logs = "graph_breaks,perf"
        assert logging.getLogger("danlu_dynamo.graph_breaks").isEnabledFor(logging.INFO)
        assert logging.getLogger("danlu.perf").isEnabledFor(logging.INFO)
        assert logging.getLogger("danlu_dynamo.guards").level == logging.NOTSET
    finally:
        danlu.config.logs = ""
    assert logging.getLogger("danlu.perf").level == logging.NOTSET


def test_optimized_module_wrapper_behaves_like_the_module():
    from danlu.compile import OptimizedModule

    torch.manual_seed(0)
    mod = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Dropout(0.5))
    wrapped = OptimizedModule(mod, mod.forward)
    assert wrapped._orig_mod is mod
    assert list(wrapped.parameters()) == list(mod.parameters())
    assert wrapped.state_dict().keys() == mod.state_dict().keys()
    wrapped.eval()
    assert not mod.training and not wrapped.training
    wrapped.train()
    assert mod.training
    mod.note = "kept"
    assert wrapped.note == "kept"  # attribute access falls through to the original
    wrapped.custom_flag = 7
    assert mod.custom_flag == 7
    x = torch.randn(2, 4)
    wrapped.eval()
    torch.testing.assert_close(wrapped(x), mod(x), rtol=0, atol=0)


@pytest.mark.parametrize("mode", ["reduce-overhead", "max-autotune"])
def test_inductor_modes_are_accepted_and_say_they_change_nothing_on_cpu(mode):
    with pytest.warns(UserWarning, match=rf"mode='{mode}' .* has no effect on the CPU"):
        f = danlu.compile(lambda x: x * 2 + 1, mode=mode)
    x = torch.randn(3)
    torch.testing.assert_close(f(x), x * 2 + 1)


def test_unknown_inductor_option_names_the_valid_ones():
    import danlu_inductor

    valid = sorted(getattr(danlu_inductor, "OPTIONS", ())) or ["none"]
    pattern = r"unknown (danlu_)?inductor option\(s\) \['max_autotun'\].*valid options: "
    with pytest.raises(ValueError, match=pattern) as err:
        danlu.compile(lambda x: x, options={"max_autotun": True})
    assert all(name in str(err.value) for name in valid)


def test_mode_and_options_are_rejected_for_a_callable_backend():
    with pytest.raises(ValueError, match="named backends only"):
        danlu.compile(lambda x: x, backend=lambda gm, ex: gm.forward, mode="max-autotune")
