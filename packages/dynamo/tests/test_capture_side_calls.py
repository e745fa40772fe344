"""Logging and lru_cache helpers inside traced code: no graph break, and the messages the user
sees are the eager ones (``_once`` helpers once, plain logger calls on every call)."""

import functools
import logging
import warnings

import pytest
import torch

import danlu_dynamo


class _Collect(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records = []

    def emit(self, record):
        self.records.append(record)


@pytest.fixture
def logger():
    log = logging.getLogger(f"danlu_test_side_calls.{id(object())}")
    log.propagate = False
    log.setLevel(logging.INFO)
    h = _Collect()
    log.addHandler(h)
    log.collected = h.records
    yield log
    log.removeHandler(h)


@functools.lru_cache(None)
def _warn_once(self, *args, **kwargs):
    # transformers' helper, installed as logging.Logger.warning_once
    self.warning(*args, **kwargs)


def _breaks(fn, *args):
    e = danlu_dynamo.explain(fn)(*args)
    return e.graph_break_count + len(e.eager_regions), e


def test_warning_once_method_no_break_printed_once(logger, monkeypatch):
    monkeypatch.setattr(logging.Logger, "danlu_warn_once", _warn_once, raising=False)

    def f(x, scale):
        y = x * scale
        logger.danlu_warn_once(f"using scale {scale} on {x.dim()}-d input")
        return y.sin()

    opt = danlu_dynamo.optimize("eager")(f)
    for seed in (0, 1, 2):
        x = torch.randn(3, 4, generator=torch.Generator().manual_seed(seed))
        torch.testing.assert_close(opt(x, 2.0), f(x, 2.0))
    msgs = [r.getMessage() for r in logger.collected]
    assert msgs == ["using scale 2.0 on 2-d input"]  # once, as eager's cache prints it
    opt(torch.randn(5), 3.0)  # new message (new constant): recompiles, printed once more
    opt(torch.randn(5), 3.0)
    assert [r.getMessage() for r in logger.collected][1:] == ["using scale 3.0 on 1-d input"]
    n, e = _breaks(f, torch.randn(3), 2.0)
    assert n == 0 and e.graph_count == 1


def test_lru_cache_function_on_constants_folds_and_runs_once():
    calls = []

    @functools.cache  # lru_cache(maxsize=None)
    def table_size(n, mult=2):
        calls.append(n)
        return n * mult

    def f(x):
        return x[: table_size(2, mult=1)] * table_size(3)

    x = torch.randn(6)
    opt = danlu_dynamo.optimize("eager")(f)
    torch.testing.assert_close(opt(x), x[:2] * 6)
    torch.testing.assert_close(opt(x + 1), (x + 1)[:2] * 6)
    assert sorted(calls) == [2, 3]  # the body ran once per argument tuple
    assert _breaks(f, x)[0] == 0


def test_lru_cache_bounded_still_breaks():
    @functools.lru_cache(maxsize=4)
    def k(n):
        return n + 1

    def f(x):
        return x * k(3)

    x = torch.randn(4)
    torch.testing.assert_close(danlu_dynamo.optimize("eager")(f)(x), x * 4)
    assert _breaks(f, x)[0] >= 1


def test_lru_cache_non_constant_result_breaks_body_once():
    calls = []

    @functools.lru_cache(None)
    def dims(n):
        calls.append(n)
        return [n, n + 1]  # a list: not folded

    def f(x):
        a, b = dims(2)
        return x.reshape(a, b) + 1

    x = torch.randn(6)
    opt = danlu_dynamo.optimize("eager")(f)
    for _ in range(2):
        torch.testing.assert_close(opt(x), x.reshape(2, 3) + 1)
    assert calls == [2]
    assert _breaks(f, x)[0] >= 1


def test_lru_cache_on_tensor_argument_breaks():
    @functools.lru_cache(None)
    def ident(t):
        return 1

    def f(x):
        return x + ident(x)

    x = torch.randn(3)
    torch.testing.assert_close(danlu_dynamo.optimize("eager")(f)(x), x + 1)
    assert _breaks(f, x)[0] >= 1


def test_logger_warning_replayed_every_call(logger):
    def f(x, k):
        logger.warning("step %d of %s", k, "train")
        y = x.cos()
        logger.info("done")
        logger.debug("hidden")  # below the logger's level
        return y * k

    opt = danlu_dynamo.optimize("eager")(f)
    x = torch.randn(4, 3).t()
    for _ in range(3):
        torch.testing.assert_close(opt(x, 2), f(x, 2))
    msgs = [r.getMessage() for r in logger.collected]
    assert msgs == ["step 2 of train", "done"] * 6  # eager and compiled alternate
    eager_rec, ours = logger.collected[0], logger.collected[2]
    # attributed to the user's line, not to capture's machinery
    assert (ours.pathname, ours.lineno, ours.funcName) == (
        eager_rec.pathname,
        eager_rec.lineno,
        eager_rec.funcName,
    )
    assert ours.levelno == logging.WARNING and ours.name == logger.name
    # the level is read at run time: no recompile needed for the change to show
    logger.setLevel(logging.ERROR)
    logger.collected.clear()
    opt(x, 2)
    assert logger.collected == []
    logger.setLevel(logging.DEBUG)
    opt(x, 2)
    assert [r.getMessage() for r in logger.collected] == ["step 2 of train", "done", "hidden"]
    assert _breaks(f, x, 2)[0] == 0


def test_logger_log_with_level(logger):
    def f(x):
        logger.log(logging.ERROR, "bad %s", "thing")
        return x + 1

    x = torch.randn(2)
    danlu_dynamo.optimize("eager")(f)(x)
    assert [(r.levelno, r.getMessage()) for r in logger.collected] == [(logging.ERROR, "bad thing")]
    assert _breaks(f, x)[0] == 0


def test_logger_with_tensor_argument_breaks_and_logs(logger):
    def f(x):
        y = x * 2
        logger.warning("value %s", y.sum())
        return y

    x = torch.randn(3)
    opt = danlu_dynamo.optimize("eager")(f)
    torch.testing.assert_close(opt(x), x * 2)
    torch.testing.assert_close(opt(x), x * 2)
    assert len(logger.collected) == 2
    assert logger.collected[0].getMessage().startswith("value tensor(")
    assert _breaks(f, x)[0] >= 1


def test_logger_with_exc_info_keyword_breaks(logger):
    def f(x):
        logger.warning("w", stack_info=True)
        return x - 1

    x = torch.randn(2)
    torch.testing.assert_close(danlu_dynamo.optimize("eager")(f)(x), x - 1)
    assert len(logger.collected) == 1
    assert _breaks(f, x)[0] >= 1


def test_logger_replay_then_later_break_keeps_order(logger):
    def f(x):
        logger.warning("first")
        y = x + 1
        print("break")
        logger.warning("second")
        return y

    x = torch.randn(2)
    danlu_dynamo.optimize("eager")(f)(x)
    assert [r.getMessage() for r in logger.collected] == ["first", "second"]
    n, e = _breaks(f, x)
    assert e.graph_break_count == 1 and not e.eager_regions


def _warn_helper(x):
    warnings.warn("helper is deprecated", DeprecationWarning, stacklevel=2)
    return x * 3


def test_warnings_warn_replayed_with_eager_location_and_filters():
    def f(x):
        warnings.warn("careful", UserWarning, stacklevel=1)
        y = x.exp()
        return _warn_helper(y)  # stacklevel=2: attributed to this line

    x = torch.randn(3)
    opt = danlu_dynamo.optimize("eager")(f)
    with warnings.catch_warnings(record=True) as ref:
        warnings.simplefilter("always")
        expected = f(x)
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        for _ in range(2):
            torch.testing.assert_close(opt(x), expected)
    assert len(ref) == 2 and len(got) == 4  # every call, as the "always" filter says
    key = [(str(w.message), w.category, w.filename, w.lineno) for w in ref]
    assert [(str(w.message), w.category, w.filename, w.lineno) for w in got] == key * 2
    with warnings.catch_warnings(record=True) as quiet:
        warnings.simplefilter("ignore")
        opt(x)
    assert quiet == []
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        assert _breaks(f, x)[0] == 0


def test_warnings_warn_error_filter_breaks_and_raises():
    def f(x):
        y = x + 1
        warnings.warn("stop here", RuntimeWarning, stacklevel=1)
        return y * 2

    x = torch.randn(2)
    opt = danlu_dynamo.optimize("eager")(f)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        torch.testing.assert_close(opt(x), (x + 1) * 2)
    assert len(rec) == 1
    # the same compiled function under an "error" filter: the guard sends it back to tracing,
    # which breaks, so the exception comes from the call itself
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(RuntimeWarning, match="stop here"):
            opt(x)
    reasons = [str(b.reason) for b in opt._capture_ctx.breaks]
    assert any("into an error" in r for r in reasons), reasons


def test_warnings_warn_stacklevel_outside_frame_breaks():
    def f(x):
        warnings.warn("from caller", UserWarning, stacklevel=2)
        return x + 1

    x = torch.randn(2)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        torch.testing.assert_close(danlu_dynamo.optimize("eager")(f)(x), x + 1)
        assert _breaks(f, x)[0] >= 1
    assert len(rec) >= 1
