"""Random sample arguments for every prim, in several memory layouts.

``prim_samples(name)`` yields ``(args, kwargs)`` pairs of real CPU tensors. Layouts cover
contiguous, transposed, strided-slice (non-dense), channels-last and size-1 dims.
"""

from __future__ import annotations

import torch

from danlu_primtorch.prims.elementwise import BINARY, UNARY

CPU = torch.device("cpu")
GEN = torch.Generator().manual_seed(1234)

LAYOUTS = ("contiguous", "transposed", "sliced", "channels_last", "unit_dims")


def _values(shape, dtype, low=-3.0, high=3.0):
    if dtype == torch.bool:
        return torch.rand(shape, generator=GEN) > 0.5
    if dtype.is_floating_point:
        return (torch.rand(shape, generator=GEN, dtype=torch.float64) * (high - low) + low).to(
            dtype
        )
    return torch.randint(int(low), int(high) + 1, shape, generator=GEN, dtype=dtype)


def make(shape, dtype, layout="contiguous", **kw):
    """A tensor of ``shape`` whose strides follow ``layout``."""
    shape = list(shape)
    if layout == "transposed" and len(shape) >= 2:
        t = _values(shape[:-2] + [shape[-1], shape[-2]], dtype, **kw)
        return t.transpose(-1, -2)
    if layout == "sliced" and len(shape) >= 1:
        big = shape[:-1] + [shape[-1] * 2]
        return _values(big, dtype, **kw)[..., ::2]
    if layout == "channels_last" and len(shape) == 4:
        return _values(shape, dtype, **kw).contiguous(memory_format=torch.channels_last)
    return _values(shape, dtype, **kw)


SHAPES = ([2, 3, 4, 5], [3, 1, 4], [5], [], [2, 0, 3])


def _float_kw(name):
    if name in ("acosh",):
        return {"low": 1.0, "high": 4.0}
    if name in ("asin", "acos", "atanh", "erfinv"):
        return {"low": -0.99, "high": 0.99}
    if name in ("log", "log2", "log10", "sqrt", "rsqrt", "lgamma", "digamma", "log1p"):
        return {"low": 0.1, "high": 4.0}
    return {}


def _dtypes(allowed):
    out = []
    if "float" in allowed:
        out += [torch.float32, torch.float64, torch.bfloat16]
    if "int" in allowed:
        out += [torch.int32, torch.int64]
    if "bool" in allowed:
        out += [torch.bool]
    return out


def elementwise_samples(name):
    if name in UNARY:
        _, allowed, _, _ = UNARY[name]
        arity = 1
    else:
        _, allowed, _, _ = BINARY[name]
        arity = 2
    kw = _float_kw(name)
    for dtype in _dtypes(allowed):
        for shape in SHAPES:
            for i, layout in enumerate(LAYOUTS):
                layouts = [layout, LAYOUTS[(i + 1) % len(LAYOUTS)]][:arity]
                args = [make(shape, dtype, lay, **kw) for lay in layouts]
                if name in ("div", "remainder", "fmod") and not dtype.is_floating_point:
                    args[1] = torch.where(args[1] == 0, torch.ones_like(args[1]), args[1])
                if name == "pow" and not dtype.is_floating_point:
                    args[1] = args[1].abs()
                if name in ("shift_left", "shift_right_arithmetic"):
                    args[1] = args[1].abs()
                yield args, {}


def _float_layouts(shape=(2, 3, 4, 5), dtype=torch.float32):
    for layout in LAYOUTS:
        yield make(shape, dtype, layout)


def where_samples():
    for shape in SHAPES:
        for i, layout in enumerate(LAYOUTS):
            pred = make(shape, torch.bool, LAYOUTS[(i + 2) % 5])
            yield (
                [pred, make(shape, torch.float32, layout), make(shape, torch.float32, "sliced")],
                {},
            )


def convert_samples():
    for a in _float_layouts():
        for dtype in (torch.float64, torch.int32, torch.bool, torch.bfloat16):
            yield [a, dtype], {}


def view_samples(name):
    for a in _float_layouts():
        if name == "broadcast_in_dim":
            yield [a, [3, 2, 3, 4, 5], [1, 2, 3, 4]], {}
            yield [a[:, :1], [2, 7, 4, 5], [0, 1, 2, 3]], {}
        elif name == "reshape":
            yield [a, [6, 20]], {}
            yield [a, [2, 3, 20]], {}
            yield [a, [120]], {}
            yield [a, [2, 1, 3, 4, 5, 1]], {}
        elif name == "view_of":
            yield [a], {}
        elif name == "permute":
            yield [a, [3, 1, 0, 2]], {}
            yield [a, [-1, 0, 1, 2]], {}
        elif name == "slice":
            yield [a, 1, 1, 3, 1], {}
            yield [a, -1, 0, 5, 2], {}
            yield [a, 2, 4, 4, 3], {}
        elif name == "squeeze":
            yield [a[:, :1], [1]], {}
            yield [a, []], {}
        elif name == "expand_dims":
            yield [a, [0, 5]], {}
            yield [a, [2]], {}
        elif name == "as_strided":
            yield [a, [2, 3], [1, 2], 3], {}


def reduction_samples(name):
    if name in ("any", "all"):
        dtypes = [torch.bool]
    elif name in ("prod",):
        dtypes = [torch.float32, torch.int64]
    elif name == "var":
        dtypes = [torch.float32, torch.float64]
    else:
        dtypes = [torch.float32, torch.int32]
    for dtype in dtypes:
        for layout in LAYOUTS:
            a = make([2, 3, 4, 5], dtype, layout)
            for dims in ([1], [0, 3], [], [0, 1, 2, 3], [-1]):
                if name in ("argmax", "argmin", "cumsum", "cumprod"):
                    if len(dims) != 1:
                        continue
                    yield [a, dims[0]], {}
                elif name == "var":
                    yield [a, dims, 1.0], {}
                elif name == "sort":
                    if len(dims) == 1:
                        yield [a, dims[0], True, True], {}
                        yield [a, dims[0], False, False], {}
                else:
                    yield [a, dims], {}


def creation_samples(name):
    cpu = CPU
    if name == "full":
        yield [[2, 3], 1.5], {"dtype": torch.float32, "device": cpu}
        yield [[0, 3], 7], {"dtype": torch.int64, "device": cpu}
    elif name == "iota":
        yield [5], {"start": 2, "step": 3, "dtype": torch.int64, "device": cpu}
        yield [4], {"start": -1, "step": 2, "dtype": torch.float32, "device": cpu}
    elif name == "empty_strided":
        yield [[2, 3], [1, 2]], {"dtype": torch.float32, "device": cpu}
    elif name == "scalar_tensor":
        yield [2.5], {"dtype": torch.float64, "device": cpu}
    elif name == "copy_strided":
        for a in _float_layouts():
            yield [a, [1, 2, 6, 24]], {}
            yield [a, [60, 20, 5, 1]], {}
    elif name == "device_put":
        for a in _float_layouts():
            yield [a, cpu], {}


def rng_samples(name):
    kw = {"dtype": torch.float32, "device": CPU}
    if name == "uniform":
        yield [[3, 4], -1.0, 2.0], kw
    elif name == "normal":
        yield [[3, 4], 1.0, 0.5], kw
    elif name == "randint":
        yield [[3, 4], -2, 9], {"dtype": torch.int64, "device": CPU}
    elif name == "bernoulli":
        for layout in LAYOUTS:
            yield [make([2, 3, 4, 5], torch.float32, layout, low=0.0, high=1.0)], {}


def indexing_samples(name):
    for layout in LAYOUTS:
        if layout == "channels_last":  # dense but not contiguous, dims reversed
            a = make([6, 5, 4], torch.float32).transpose(0, 2)
        else:
            a = make([4, 5, 6], torch.float32, layout)
        if name == "gather":
            idx = torch.randint(0, a.shape[1], (3, 2, a.shape[2]), generator=GEN)
            yield [a, 1, idx], {}
        elif name in ("scatter", "scatter_reduce"):
            idx = torch.randint(0, a.shape[0], (3, a.shape[1], a.shape[2]), generator=GEN)
            if name == "scatter":
                idx = torch.arange(3).view(3, 1, 1).expand(idx.shape).contiguous()
            src = make(
                [3, a.shape[1], a.shape[2]],
                torch.float32,
                layout if layout != "channels_last" else "contiguous",
            )
            if name == "scatter":
                yield [a, 0, idx, src], {}
            else:
                for red in ("sum", "prod", "mean", "amax", "amin"):
                    yield [a, 0, idx, src, red, red != "prod"], {}
        elif name == "index_select":
            yield [a, 1, torch.tensor([4, 0, 0, 2])], {}
        elif name in ("index", "index_put"):
            i0 = torch.randint(0, a.shape[0], (2, 3), generator=GEN)
            i2 = torch.randint(0, a.shape[2], (2, 3), generator=GEN)
            for indices, shape in (
                ([None, i0.clamp(max=a.shape[1] - 1)], [4, 2, 3, 6]),
                ([i0, None, i2], [2, 3, 5]),
                ([i0], [2, 3, 5, 6]),
            ):
                if name == "index":
                    yield [a, indices], {}
                else:
                    yield [a, indices, make(shape, torch.float32), layout == "sliced"], {}


def data_movement_samples(name):
    for layout in LAYOUTS:
        a = make([2, 3, 4, 5], torch.float32, layout)
        if name == "cat":
            yield [[a, make([2, 3, 4, 5], torch.float32, layout), a[:, :1]], 1], {}
            yield [[a, make([2, 3, 4, 5], torch.float32, "contiguous")], -1], {}
        elif name == "pad":
            yield [a, [0, 1, -1, 2], [1, 0, 2, -2], 0.5], {}


def library_samples(name):
    if name == "mm":
        for layout in LAYOUTS[:3]:
            yield (
                [make([5, 7], torch.float32, layout), make([7, 3], torch.float32, "transposed")],
                {},
            )
    elif name == "bmm":
        for layout in LAYOUTS[:3]:
            yield [make([2, 5, 7], torch.float64, layout), make([2, 7, 3], torch.float64)], {}
    elif name == "convolution":
        for layout in ("contiguous", "channels_last", "sliced"):
            x = make([2, 4, 9, 8], torch.float32, layout)
            w = make([6, 2, 3, 3], torch.float32)
            b = make([6], torch.float32)
            yield [x, w, b, [2, 1], [1, 0], [1, 2], False, [0, 0], 2], {}
            wt = make([4, 3, 3, 3], torch.float32)
            yield [x, wt, None, [2, 2], [1, 1], [1, 1], True, [1, 0], 1], {}
        x1 = make([2, 3, 10], torch.float64)
        yield [x1, make([4, 3, 3], torch.float64), None, [1], [1], [1], False, [0], 1], {}
    elif name == "scaled_dot_product_attention":
        for layout in ("contiguous", "transposed"):
            q = make([2, 3, 5, 8], torch.float32, layout)
            k = make([2, 3, 6, 8], torch.float32)
            v = make([2, 3, 6, 4], torch.float32)
            yield [q, k, v, None, False, None], {}
            yield [q, k[:, :, :5], v[:, :, :5], None, True, 0.3], {}
            mask = torch.rand(2, 3, 5, 6, generator=GEN) > 0.3
            yield [q, k, v, mask, False, None], {}
            yield [q, k, v, make([2, 3, 5, 6], torch.float32), False, None], {}


def prim_samples(info):
    name, kind = info.name, info.kind.value
    if name in UNARY or name in BINARY:
        return list(elementwise_samples(name))
    if name == "where":
        return list(where_samples())
    if name == "convert_element_type":
        return list(convert_samples())
    table = {
        "view": view_samples,
        "reduction": reduction_samples,
        "scan": reduction_samples,
        "creation": creation_samples,
        "rng": rng_samples,
        "indexing": indexing_samples,
        "data_movement": creation_samples
        if name in ("copy_strided", "device_put")
        else data_movement_samples,
        "library": library_samples,
    }
    return list(table[kind](name))
