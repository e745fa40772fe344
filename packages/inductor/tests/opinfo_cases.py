"""OpInfo samples traced to canonical ATen, for checking lowerings against eager.

Each case is (op name, dtype, sample index, layout) -> a traced graph and its inputs. All
cases are compiled in one batch (one C++ compiler run) by the test module's fixture.
"""

from __future__ import annotations

import torch
from torch.utils import _pytree as pytree

OPS = (
    # pointwise unary
    "abs neg sign sgn reciprocal exp exp2 expm1 log log2 log10 log1p sqrt rsqrt sin cos tan "
    "asin acos atan sinh cosh tanh asinh acosh atanh sigmoid erf erfc lgamma floor ceil trunc "
    "round bitwise_not logical_not isnan isinf signbit "
    "nn.functional.relu nn.functional.gelu nn.functional.silu nn.functional.hardtanh "
    "nn.functional.leaky_relu nn.functional.elu nn.functional.hardsigmoid "
    "nn.functional.hardswish "
    # pointwise binary and ternary
    "add sub mul div remainder fmod pow maximum minimum fmax fmin atan2 hypot copysign "
    "bitwise_and bitwise_or bitwise_xor logical_and logical_or logical_xor eq ne lt le gt ge "
    "where clamp masked_fill lerp addcmul addcdiv true_divide floor_divide rsub nextafter "
    # reductions and normalizations
    "sum prod mean amax amin argmax argmin max min var std var_mean any all softmax "
    "log_softmax nn.functional.layer_norm logsumexp "
    # views and data movement
    "permute t transpose expand narrow select unsqueeze squeeze view reshape flatten split "
    "chunk unbind movedim cat nn.functional.pad index_select gather nn.functional.embedding "
    "full_like zeros_like ones_like clone contiguous "
    # library calls
    "mm bmm addmm nn.functional.linear nn.functional.conv2d nn.functional.max_pool2d"
).split()

DTYPES = (torch.float32, torch.float64, torch.int64, torch.bool)
SAMPLES_PER_DTYPE = 3


def _strided_copy(t: torch.Tensor) -> torch.Tensor:
    """Same values, non-contiguous layout (transposed storage)."""
    if t.dim() < 2:
        return t
    return t.transpose(0, 1).contiguous().transpose(0, 1)


def build_cases(limit_ops=None, dynamic=False):
    from torch.testing._internal.common_methods_invocations import op_db

    from danlu_inductor.decompositions import decomposition_table
    from danlu_primtorch import trace

    table = decomposition_table()
    wanted = set(limit_ops or OPS)
    cases = []
    skipped = []
    for info in op_db:
        if info.name not in wanted:
            continue
        for dtype in DTYPES:
            if dtype not in info.supported_dtypes("cpu"):
                continue
            try:
                samples = list(info.sample_inputs("cpu", dtype, requires_grad=False))
            except Exception as e:  # sample generation itself failing is not our concern
                skipped.append((info.name, dtype, f"samples: {e}"))
                continue
            for k, sample in enumerate(samples[:SAMPLES_PER_DTYPE]):
                layouts = ["contiguous"] + (["strided"] if k == 0 else [])
                for layout in layouts:
                    case = _make_case(info, dtype, k, layout, sample, table, trace, dynamic)
                    if isinstance(case, dict):
                        cases.append(case)
                    else:
                        skipped.append(case)
    return cases, skipped


def _make_case(info, dtype, k, layout, sample, table, trace, dynamic=False):
    name = info.name + (f".{info.variant_test_name}" if info.variant_test_name else "")
    leaves, spec = pytree.tree_flatten((sample.input, sample.args, sample.kwargs))
    tensor_pos = [i for i, x in enumerate(leaves) if isinstance(x, torch.Tensor)]
    tensors = [leaves[i] for i in tensor_pos]
    if layout == "strided":
        tensors = [_strided_copy(t) for t in tensors]
        if all(t.is_contiguous() for t in tensors):
            return (name, dtype, "no strided variant")
    op = info.op

    def fn(*ts):
        vals = list(leaves)
        for i, t in zip(tensor_pos, ts):
            vals[i] = t
        inp, args, kwargs = pytree.tree_unflatten(vals, spec)
        return op(inp, *args, **kwargs)

    try:
        expected = fn(*tensors)
    except Exception as e:
        return (name, dtype, f"eager fails: {e}")
    try:
        if dynamic:
            gm = trace(fn, *tensors, decompositions=table, dynamic=True)
        else:
            gm = trace(fn, *tensors, decompositions=table)
    except Exception as e:
        return (name, dtype, f"trace fails: {type(e).__name__}: {e}")
    return {
        "id": f"{name}-{str(dtype).replace('torch.', '')}-{k}-{layout}",
        "op": name,
        "base": info.name,
        "dtype": dtype,
        "gm": gm,
        "inputs": tensors,
        "expected": expected,
    }
