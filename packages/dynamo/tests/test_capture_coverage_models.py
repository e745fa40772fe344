"""Capture coverage for constructs met in real models (transformers 5.17 and 5.24): each
program is checked against eager bit for bit through the "eager" backend, on two shapes, and
must be captured whole (no graph break, no eager region)."""

import copy
import dataclasses

import pytest
import torch

import danlu_dynamo

SHAPES = [(4, 8), (3, 5, 6)]


def _capture_whole(fn, make_args):
    """Run ``fn`` eagerly and captured on two shapes; return the captured wrapper."""
    opt = danlu_dynamo.optimize("eager")(fn)
    for shape in SHAPES:
        torch.manual_seed(0)
        args = make_args(shape)
        ref = fn(*args)
        for _ in range(2):
            got = opt(*args)
            assert type(got) is type(ref)
            if isinstance(ref, torch.Tensor):
                assert torch.equal(ref, got)
                assert ref.requires_grad == got.requires_grad
            else:
                assert all(torch.equal(a, b) for a, b in zip(ref, got, strict=True))
    ctx = opt._capture_ctx
    assert not ctx.breaks, [str(b) for b in ctx.breaks]
    assert not ctx.eager_reasons, ctx.eager_reasons
    assert any(s.num_ops > 0 for s in ctx.records)
    return opt


# --------------------------------------------------------------------- hasattr on a constant


def hasattr_on_none(x, cache=None):
    # transformers' masking_utils: `hasattr(past_key_values, "is_sliding") and ...` with None
    if hasattr(cache, "is_sliding") and False in cache.is_sliding:
        return x * 2
    return x + 1


def hasattr_on_constants(x):
    y = x
    if hasattr(3, "real"):
        y = y * 3
    if not hasattr("s", "nope"):
        y = y - 1
    if getattr(None, "is_sliding", None) is None:
        y = y.cos()
    return y


@pytest.mark.parametrize("fn", [hasattr_on_none, hasattr_on_constants])
def test_hasattr_of_constants(fn):
    _capture_whole(fn, lambda s: (torch.randn(s),))


# --------------------------------------------------------- torch.no_grad() used as a decorator


@torch.no_grad()
def _no_grad_helper(x, w):
    return (x @ w).sin() * 2


@torch.no_grad
def _no_grad_bare(x):
    return x.exp()


@torch.enable_grad()
def _enable_grad_helper(x):
    return x * 3


@torch.set_grad_enabled(False)
def _set_grad_helper(x):
    return x - 1


class _Rotary(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.register_buffer("inv_freq", torch.arange(n, dtype=torch.float32) / n)

    @torch.no_grad()
    def forward(self, x):
        return x * self.inv_freq


def decorated_no_grad(x, w):
    y = x * w.sum()  # tracks grad
    z = _no_grad_helper(x, w.t() @ w)  # no grad inside the decorated function
    return y + z + _no_grad_bare(x)


def decorated_modes(x, w):
    y = x * w.mean()
    with torch.no_grad():
        a = _enable_grad_helper(y)  # grad back on inside
    b = _set_grad_helper(y)
    return a + b + y


_rot = {n: _Rotary(n) for n in (8, 6)}


def decorated_module_forward(x, w):
    mod = _rot[x.shape[-1]]
    return mod(x * w.sum()) + x


def _grad_args(shape):
    x = torch.randn(shape)
    w = torch.randn(shape[-1], shape[-1], requires_grad=True)
    return x, w


@pytest.mark.parametrize("fn", [decorated_no_grad, decorated_modes, decorated_module_forward])
def test_context_manager_decorator_is_inlined(fn):
    _capture_whole(fn, _grad_args)
    assert torch.is_grad_enabled()


def test_no_grad_decorator_backward_matches_eager():
    def loss(x, w):
        return decorated_no_grad(x, w).pow(2).sum() + decorated_modes(x, w).sum()

    opt = danlu_dynamo.optimize("eager")(loss)
    for shape in SHAPES:
        torch.manual_seed(1)
        x, w = _grad_args(shape)
        loss(x, w).backward()
        ref = w.grad
        w.grad = None
        opt(x, w).backward()
        assert torch.equal(ref, w.grad)
    assert not opt._capture_ctx.breaks


# ----------------------------------------------------------------------------- copy.deepcopy


class _Config:
    """Like a transformers config: aliases resolved by custom __getattribute__/__setattr__."""

    attribute_map = {"hidden": "d_model", "layers": "num_layers"}

    def __init__(self, d_model, num_layers, decoder_layers):
        self.d_model = d_model
        self.num_layers = num_layers
        self.decoder_layers = decoder_layers
        self.names = ["a", "b"]
        self.extra = {"scale": 2.0, "shape": (1, 2)}

    def __setattr__(self, key, value):
        if key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        super().__setattr__(key, value)

    def __getattribute__(self, key):
        if key != "attribute_map" and key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        return super().__getattribute__(key)

    def to_dict(self):
        out = copy.deepcopy(self.__dict__)
        out["kind"] = type(self).__name__
        return out

    @property
    def is_big(self):
        return self.hidden > 4

    def decoder_view(self):
        cfg = copy.deepcopy(self)
        for key in cfg.to_dict():
            if key.startswith("decoder_"):
                value = getattr(cfg, key)
                delattr(cfg, key)
                setattr(cfg, key[len("decoder_") :], value)
        cfg.layers = cfg.layers + 1  # through the alias
        return cfg


_cfg = _Config(8, 2, 3)


def deepcopy_config(x):
    cfg = _cfg.decoder_view()
    y = x * cfg.hidden + cfg.layers
    if hasattr(cfg, "decoder_layers") or not hasattr(cfg, "layers"):
        y = y * 100
    if cfg.is_big and cfg.extra["scale"] == 2.0 and cfg.names[1] == "b":
        y = y.sin()
    return y + len(cfg.to_dict())


def test_deepcopy_of_a_config_object():
    _capture_whole(deepcopy_config, lambda s: (torch.randn(s),))


def test_deepcopy_result_escapes_and_is_fresh():
    def fn(x):
        cfg = _cfg.decoder_view()
        return x + cfg.d_model, cfg

    opt = danlu_dynamo.optimize("eager")(fn)
    x = torch.randn(3)
    r1, c1 = opt(x)
    r2, c2 = opt(x)
    ref, cref = fn(x)
    assert torch.equal(r1, ref) and torch.equal(r2, ref)
    assert c1 is not c2 and c1 is not _cfg and c1.names is not _cfg.names
    for c in (c1, c2):
        assert type(c) is _Config and c.__dict__ == cref.__dict__
    assert not opt._capture_ctx.breaks


def test_deepcopy_source_change_is_guarded():
    cfg = _Config(8, 2, 3)

    def fn(x):
        c = copy.deepcopy(cfg)
        return x * c.num_layers + c.extra["scale"]

    opt = danlu_dynamo.optimize("eager")(fn)
    x = torch.randn(4)
    assert torch.equal(opt(x), fn(x))
    cfg.num_layers = 5
    cfg.extra["scale"] = 3.0
    assert torch.equal(opt(x), fn(x))
    cfg.new_attr = 1  # a new key in __dict__
    assert torch.equal(opt(x), fn(x))


def deepcopy_containers(x):
    shared = [1, 2]
    d = {"a": shared, "b": shared, "t": (3, [4])}
    c = copy.deepcopy(d)
    c["a"].append(5)  # the copy keeps the sharing; the original is untouched
    return x * len(c["b"]) + len(shared) + c["t"][1][0]


def test_deepcopy_of_containers():
    _capture_whole(deepcopy_containers, lambda s: (torch.randn(s),))


def deepcopy_tensor(x):
    c = copy.deepcopy({"w": x})
    return c["w"] * 2


def test_deepcopy_of_a_tensor_breaks_and_stays_correct():
    x = torch.randn(3)
    opt = danlu_dynamo.optimize("eager")(deepcopy_tensor)
    for _ in range(2):
        assert torch.equal(opt(x), deepcopy_tensor(x))
    assert opt._capture_ctx.breaks or opt._capture_ctx.eager_reasons


# ------------------------------------------------- AttributeError under a handler (hasattr)


class _Lazy:
    def __init__(self):
        self.base = 3

    @property
    def cached(self):
        try:
            return self._cache  # missing: the handler gives a default
        except AttributeError:
            return -1


_lazy = _Lazy()


def hasattr_through_handler(x):
    # hasattr must see the property's handler (True), never the inner AttributeError
    if hasattr(_lazy, "cached"):
        return x + 1
    return x - 1


def test_hasattr_never_skips_an_inner_handler():
    x = torch.randn(4)
    opt = danlu_dynamo.optimize("eager")(hasattr_through_handler)
    for _ in range(2):
        assert torch.equal(opt(x), hasattr_through_handler(x))


def test_deepcopy_leaves_the_original_untouched():
    before = copy.deepcopy(_cfg.__dict__)
    opt = danlu_dynamo.optimize("eager")(deepcopy_config)
    for shape in SHAPES:
        x = torch.randn(shape)
        assert torch.equal(opt(x), deepcopy_config(x))
    assert _cfg.__dict__ == before


class _Node:
    def __init__(self, value):
        self.value = value
        self.children = [value, (value, [value])]
        self.shared = self.children  # two references: the copy shares one new list


@dataclasses.dataclass
class _Params:
    scale: float
    dims: list


_node = _Node(3)
_params = _Params(1.5, [2, 3])


def deepcopy_cycle_and_dataclass(x):
    n = copy.deepcopy(_node)
    p = copy.deepcopy(_params)
    p.dims.append(4)
    ok = n.shared is n.children and n.children[1][1] is not _node.children[1][1]
    return x * (n.value + p.scale + len(p.dims) + len(_params.dims)) + (1 if ok else -1)


def test_deepcopy_cycles_and_dataclasses():
    _capture_whole(deepcopy_cycle_and_dataclass, lambda s: (torch.randn(s),))
    assert _params.dims == [2, 3]


class _Cyclic:
    def __init__(self):
        self.me = self


_cyclic = _Cyclic()


class _Slotted:
    __slots__ = ("a",)

    def __init__(self, a):
        self.a = a


class _OwnCopy:
    def __init__(self):
        self.n = 2

    def __deepcopy__(self, memo):
        new = _OwnCopy()
        new.n = self.n * 10  # differs from a plain copy: must not be modelled as one
        return new


_slotted, _own = _Slotted(4), _OwnCopy()


def deepcopy_refused(x):
    c = copy.deepcopy(_cyclic)  # self-reference: left to eager
    return x * copy.deepcopy(_slotted).a + copy.deepcopy(_own).n + (c.me is c)


def test_deepcopy_with_its_own_protocol_breaks_and_stays_correct():
    x = torch.randn(3)
    opt = danlu_dynamo.optimize("eager")(deepcopy_refused)
    for _ in range(2):
        assert torch.equal(opt(x), deepcopy_refused(x))
    ctx = opt._capture_ctx
    assert ctx.breaks or ctx.eager_reasons
    assert not [r for r in ctx.eager_reasons if "internal" in r], ctx.eager_reasons


class _Aliased:
    """Made in the trace; its own __getattribute__/__setattr__ must run, not be bypassed."""

    _alias = {"width": "w"}

    def __init__(self, w):
        self.width = w  # stored as "w" by __setattr__

    def __setattr__(self, key, value):
        key = type(self)._alias.get(key, key)
        object.__setattr__(self, key, value)

    def __getattribute__(self, key):
        if key == "doubled":
            return object.__getattribute__(self, "w") * 2
        return super().__getattribute__(type(self)._alias.get(key, key))

    def __len__(self):
        return 7


def aliased_object(x):
    o = _Aliased(x.shape[0])
    o.width = o.width + 1
    return x * o.w + o.doubled + len(o) + ("w" in o.__dict__) + hasattr(o, "width")


def test_object_made_in_the_trace_runs_its_own_attribute_hooks():
    _capture_whole(aliased_object, lambda s: (torch.randn(s),))


class _Plain:
    def __init__(self, v):
        self.v = v


def identities_of_trace_made_containers(x):
    o = _Plain(1)
    a, b = [1], [1]
    d = o.__dict__
    r = x
    e = {}
    if d is o.__dict__ and a is not b and e is not d and a == b:
        r = r * 2
    d["w"] = 5  # writes through the instance dict
    return r + o.w + o.v


def instance_dict_across_a_break(x):
    o = _Plain(1)
    d = o.__dict__
    y = x * 2
    print("break")  # o and d are rebuilt here: d must still be o's own __dict__
    d["w"] = 5
    return y + o.w + (d is o.__dict__)


def test_instance_dict_made_in_the_trace_survives_a_break():
    x = torch.randn(3)
    opt = danlu_dynamo.optimize("eager")(instance_dict_across_a_break)
    for _ in range(2):
        assert torch.equal(opt(x), instance_dict_across_a_break(x))
    assert opt._capture_ctx.breaks


def test_identity_of_containers_made_in_the_trace():
    _capture_whole(identities_of_trace_made_containers, lambda s: (torch.randn(s),))
