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


def test_recompile_limit_runs_further_shapes_eagerly():
    danlu.reset()
    with danlu.config.patch(recompile_limit=2):
        f = danlu.compile(lambda x: x.sin() * 2, backend="eager")
        for n in (2, 3, 4, 5):
            x = torch.randn(n)
            torch.testing.assert_close(f(x), x.sin() * 2)
        assert len(danlu.CompileStats.current().graphs) == 2
    with pytest.raises(ValueError, match="positive int"):
        danlu.config.recompile_limit = 0


def test_a_failing_backend_runs_that_graph_eagerly_and_says_why(caplog):
    def broken_backend(gm, example_inputs):
        raise RuntimeError("cannot compile this")

    danlu.reset()
    f = danlu.compile(lambda x: x.cos() + 1, backend=broken_backend)
    x = torch.randn(3)
    with caplog.at_level(logging.WARNING, logger="danlu"):
        torch.testing.assert_close(f(x), x.cos() + 1)
        torch.testing.assert_close(f(x), x.cos() + 1)
    assert caplog.text.count("cannot compile this") == 1  # compiled (and failed) once
    assert "running it eagerly" in caplog.text
    (graph,) = danlu.CompileStats.current().graphs
    assert graph.error == "backend failed: RuntimeError: cannot compile this"
    assert "ran eagerly: backend failed" in danlu.CompileStats.current().summary()


def test_every_log_topic_reports_something():
    class Collect(logging.Handler):
        def __init__(self):
            super().__init__()
            self.names = []

        def emit(self, record):
            self.names.append(record.name)

    collect = Collect()
    danlu.reset()
    try:
        danlu.config.logs = "all"
        loggers = {name for names in logs.TOPICS.values() for name in names}
        for name in loggers:
            logging.getLogger(name).addHandler(collect)

        def f(x):
            y = x.sort(-1).values * 2  # sort runs in ATen: a fallback
            y = y * int(x.shape[0])  # the size made dynamic is specialised again
            if y.sum() > 0:  # a graph break
                y = y + 1
            return y

        compiled = danlu.compile(f)
        for shape in ((3, 4), (3, 4), (5, 4)):  # the new shape recompiles
            x = torch.randn(shape, requires_grad=True)
            compiled(x).sum().backward()
    finally:
        for name in loggers:
            logging.getLogger(name).removeHandler(collect)
        danlu.config.logs = ""
    for topic, names in logs.TOPICS.items():
        if topic == "ddp":  # needs a DDP forward: checked in test_distributed.py
            continue
        assert any(n in names for n in collect.names), (topic, sorted(set(collect.names)))


def test_inductor_options_are_checked_and_passed_through():
    with pytest.raises(ValueError, match="takes a bool"):
        danlu.compile(lambda x: x, options={"cudagraphs": "yes"})
    with pytest.raises(ValueError, match="disagree"):
        danlu.compile(lambda x: x, mode="reduce-overhead", options={"mode": "max-autotune"})
    f = danlu.compile(lambda x: x.exp() - 1, options={"autotune": False})
    x = torch.randn(5)
    torch.testing.assert_close(f(x), x.exp() - 1)
