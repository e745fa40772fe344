"""Capture programs, part A: arithmetic, tensor methods/attributes, torch and F functions."""
# ruff: noqa: E731, B007

from __future__ import annotations

import math
import operator

import torch
import torch.nn.functional as F

CASES = []


def case(factory):
    def deco(fn):
        CASES.append((fn.__name__, fn, factory))
        return fn

    return deco


def inp(*shapes, dtype=torch.float32, grow=0, rg=False):
    def make(g, v):
        out = []
        for s in shapes:
            s = (s[0] + v * (grow or 1),) + tuple(s[1:]) if s else s
            t = (
                torch.randn(s, generator=g, dtype=dtype)
                if dtype.is_floating_point
                else torch.randint(0, 5, s, generator=g, dtype=dtype)
            )
            out.append(t.requires_grad_(rg) if rg else t)
        return tuple(out)

    return make


def nc(*shapes):
    """Non-contiguous inputs: transposed views."""

    def make(g, v):
        out = []
        for s in shapes:
            base = torch.randn((s[1], s[0] + v), generator=g)
            out.append(base.t())
        return tuple(out)

    return make


def sliced(shape):
    def make(g, v):
        base = torch.randn((shape[0] + v, shape[1] * 2), generator=g)
        return (base[:, ::2],)

    return make


A = inp((3, 4))
AB = inp((3, 4), (3, 4))
M = lambda g, v: (torch.randn(3 + v, 4, generator=g), torch.randn(4, 5, generator=g))


# ---------------------------------------------------------------- arithmetic
@case(AB)
def add(x, y):
    return x + y


@case(AB)
def sub(x, y):
    return x - y


@case(AB)
def mul(x, y):
    return x * y


@case(AB)
def div(x, y):
    return x / (y.abs() + 1)


@case(A)
def floordiv_scalar(x):
    return x // 0.7


@case(A)
def mod_scalar(x):
    return x % 0.3


@case(A)
def pow_scalar(x):
    return x.abs() ** 1.5


@case(A)
def rpow(x):
    return 2**x


@case(A)
def neg(x):
    return -x


@case(A)
def pos(x):
    return +x


@case(inp((3, 4), dtype=torch.int64))
def invert_int(x):
    return ~x


@case(inp((3, 4), (3, 4), dtype=torch.int64))
def bitand(x, y):
    return (x & y) | (x ^ y)


@case(inp((3, 4), dtype=torch.int64))
def shifts(x):
    return (x << 1) >> 1


@case(M)
def matmul_op(x, w):
    return x @ w


@case(A)
def radd(x):
    return 1.5 + x


@case(A)
def rsub(x):
    return 1.5 - x


@case(A)
def rmul(x):
    return 3 * x


@case(A)
def rdiv(x):
    return 1.0 / (x.abs() + 1)


@case(AB)
def compare_ops(x, y):
    return (x < y, x <= y, x > y, x >= y, x == y, x != y)


@case(AB)
def iadd_tensor(x, y):
    z = x * 1
    z += y
    z *= 2
    z -= 1
    z /= 3
    return z


@case(A)
def python_number_arith(x):
    a = 3
    b = a * 2 + 1
    c = b // 2 - a % 2
    d = float(c) / 4 + 2**3
    return x * d + c


@case(A)
def python_float_math(x):
    s = math.sqrt(2.0) * math.pi + math.exp(1) - math.log(3)
    return x * s + math.floor(2.7) + math.ceil(0.2)


@case(A)
def python_compare_chain(x):
    a, b = 2, 5
    if 0 < a < b <= 5:
        return x + 1
    return x - 1


@case(A)
def bool_ops(x):
    a = True and not False
    b = None or 3
    return x * b if a else x


@case(A)
def abs_builtin(x):
    return abs(x) + abs(-3)


@case(A)
def divmod_pow(x):
    q, r = divmod(17, 5)
    return x * q + pow(2, r)


@case(A)
def round_int_float(x):
    return x * round(2.567, 2) + int(3.9) + float("1.5")


@case(A)
def operator_module(x):
    return operator.add(operator.mul(x, 2), operator.neg(x))


@case(A)
def scalar_tensor_mix(x):
    return (x * 2.0 + 1) / 3 - 0.5 * x


@case(inp((3, 4), dtype=torch.float64))
def float64_arith(x):
    return x * 1e-3 + x.sin()


@case(inp((3, 4), dtype=torch.int32))
def int_tensor_arith(x):
    return x * 3 + 1 - x // 2


@case(A)
def chained_inplace_scalar(x):
    y = x.clone()
    y.mul_(2).add_(1).div_(3)
    return y


# ---------------------------------------------------------------- tensor attributes / methods
@case(A)
def attr_shape(x):
    return x.reshape(x.shape[1], x.shape[0])


@case(A)
def attr_size_call(x):
    return x.view(x.size(0) * x.size(1))


@case(A)
def attr_size_negative(x):
    return x.new_zeros(x.size(-1))


@case(A)
def attr_ndim(x):
    return x.sum(dim=x.ndim - 1)


@case(A)
def attr_dim_numel(x):
    return x * x.dim() + x.numel()


@case(A)
def attr_T(x):
    return x.T @ x


@case(inp((2, 3, 4)))
def attr_mT(x):
    return x.mT


@case(A)
def attr_dtype(x):
    return x.to(x.dtype) + torch.ones(2, dtype=x.dtype).sum()


@case(A)
def attr_device(x):
    return torch.zeros(x.shape, device=x.device) + x


@case(A)
def attr_requires_grad(x):
    return x * 2 if not x.requires_grad else x


@case(A)
def attr_is_floating(x):
    return x + 1 if x.is_floating_point() else x


@case(A)
def method_view_reshape(x):
    return x.view(-1).reshape(2, -1)


@case(inp((2, 3, 4)))
def method_permute(x):
    return x.permute(2, 0, 1).contiguous()


@case(A)
def method_transpose(x):
    return x.transpose(0, 1)


@case(A)
def method_unsqueeze_squeeze(x):
    return x.unsqueeze(0).unsqueeze(-1).squeeze(0).squeeze(-1)


@case(A)
def method_expand(x):
    return x.unsqueeze(0).expand(2, -1, -1)


@case(A)
def method_repeat(x):
    return x.repeat(2, 1)


@case(A)
def method_flatten(x):
    return x.unsqueeze(0).flatten(1)


@case(A)
def method_chunk(x):
    a, b = x.chunk(2, dim=1)
    return a * b


@case(inp((3, 6)))
def method_split(x):
    return [t.sum() for t in x.split(2, dim=1)]


@case(A)
def method_reductions(x):
    return x.sum(), x.mean(dim=0), x.amax(1), x.prod(0), x.std(1)


@case(A)
def method_max_dim(x):
    v, i = x.max(dim=1)
    return v, i


@case(A)
def method_max_dim_named(x):
    r = x.min(dim=0)
    return r.values, r.indices


@case(A)
def method_topk(x):
    return x.topk(2, dim=1).values


@case(A)
def method_sort(x):
    return x.sort(dim=1)[0]


@case(A)
def method_argmax(x):
    return x.argmax(dim=-1)


@case(A)
def method_softmax(x):
    return x.softmax(-1).log_softmax(0)


@case(A)
def method_clamp(x):
    return x.clamp(-0.5, 0.5).clamp(min=0)


@case(A)
def method_where(x):
    return torch.where(x > 0, x, x * 0.1)


@case(A)
def method_masked_fill(x):
    return x.masked_fill(x < 0, 0.0)


@case(A)
def method_type_as(x):
    return x.long().type_as(x)


@case(A)
def method_to_dtype(x):
    return x.to(torch.float64).to(dtype=torch.float16).float()


@case(A)
def method_new_ones(x):
    return x.new_ones(2, 3) + x.new_full((2, 3), 4.0)


@case(A)
def method_cumsum(x):
    return x.cumsum(1)


@case(A)
def method_pow_exp(x):
    return x.exp().log1p().sqrt().rsqrt()


@case(A)
def method_trig(x):
    return x.sin() + x.cos() + x.tanh() + x.sigmoid()


@case(A)
def method_contiguous_noop(x):
    return x.contiguous()


@case(nc((3, 4)))
def noncontig_contiguous(x):
    return x.contiguous().view(-1)


@case(nc((3, 4)))
def noncontig_arith(x):
    return x * 2 + x.t().t()


@case(sliced((3, 4)))
def strided_slice_input(x):
    return x.sum(1) + x[:, 0]


@case(A)
def method_flip_roll(x):
    return x.flip(0).roll(1, 1)


@case(A)
def method_norm(x):
    return x.norm(dim=1) + torch.linalg.vector_norm(x, dim=0).sum()


@case(A)
def method_detach(x):
    return x.detach() * 2


@case(A)
def method_clone(x):
    return x.clone().add_(1)


@case(A)
def method_eq_all(x):
    return (x == x).all()


@case(A)
def method_any(x):
    return (x > 10).any(dim=1)


@case(A)
def method_size_tuple_ops(x):
    b, n = x.shape
    return x.reshape(n, b).sum(0) * (b + n)


@case(A)
def method_shape_index_slice(x):
    return x.new_zeros(x.shape[:-1]) + x.shape[-1]


@case(A)
def method_tril_triu(x):
    return x.tril() - x.triu(1)


@case(A)
def method_narrow_select(x):
    return x.narrow(1, 1, 2).select(0, 0)


@case(A)
def method_index_select(x):
    return x.index_select(1, torch.tensor([0, 2]))


@case(A)
def method_gather(x):
    return x.gather(1, torch.zeros(x.shape[0], 2, dtype=torch.long))


@case(A)
def method_bmm_baddbmm(x):
    return torch.bmm(x.unsqueeze(0), x.t().unsqueeze(0))


@case(A)
def method_float_half(x):
    return x.half().float().double()


@case(A)
def method_stride_query(x):
    return x * x.stride(0) + x.is_contiguous()


# ---------------------------------------------------------------- indexing
@case(A)
def index_int(x):
    return x[0] + x[-1]


@case(A)
def index_slice(x):
    return x[1:, :2]


@case(A)
def index_step(x):
    return x[::2, ::-1] if False else x[::2, 1::2]


@case(A)
def index_none_ellipsis(x):
    return x[None, ..., 0]


@case(A)
def index_tensor_bool_mask_method(x):
    return torch.where(x > 0, 1.0, 0.0).sum(0)


@case(A)
def index_long_tensor(x):
    return x[torch.tensor([0, 1, 0])]


@case(A)
def setitem_slice(x):
    y = x.clone()
    y[:, 0] = 1.0
    y[1] = y[1] * 2
    return y


@case(A)
def setitem_inplace_input(x):
    x[0] = 0.0
    return x.sum()


@case(inp((2, 3, 4)))
def index_tuple_mixed(x):
    return x[1, :, 1:3]


# ---------------------------------------------------------------- torch.* functions
@case(AB)
def torch_cat_stack(x, y):
    return torch.cat([x, y], 0), torch.stack((x, y), dim=1)


@case(A)
def torch_factories(x):
    return x + torch.ones(4) + torch.zeros(x.shape[0], 4) + torch.full((4,), 2.0)


@case(A)
def torch_arange(x):
    return x + torch.arange(4)


@case(A)
def torch_arange_float(x):
    return x * torch.arange(0, 1, 0.25)


@case(A)
def torch_linspace_eye(x):
    return x @ torch.eye(4) + torch.linspace(0, 1, 4)


@case(A)
def torch_tensor_literal(x):
    return x * torch.tensor([1.0, 2.0, 3.0, 4.0])


@case(A)
def torch_zeros_like(x):
    return torch.zeros_like(x) + torch.ones_like(x) * torch.full_like(x, 3)


@case(AB)
def torch_maximum(x, y):
    return torch.maximum(x, y) - torch.minimum(x, y)


@case(M)
def torch_matmul(x, w):
    return torch.matmul(x, w) + torch.mm(x, w)


@case(A)
def torch_einsum(x):
    return torch.einsum("ij,kj->ik", x, x)


@case(A)
def torch_outer(x):
    return torch.outer(x[0], x[1])


@case(AB)
def torch_addcmul(x, y):
    return torch.addcmul(x, x, y, value=0.5)


@case(A)
def torch_clamp_fn(x):
    return torch.clamp(x, min=-0.1, max=0.1)


@case(A)
def torch_flatten_fn(x):
    return torch.flatten(x)


@case(A)
def torch_transpose_fn(x):
    return torch.transpose(x, 0, 1)


@case(A)
def torch_chunk_fn(x):
    return torch.chunk(x, 2, dim=1)


@case(A)
def torch_split_sizes(x):
    return torch.split(x, [1, 3], dim=1)


@case(A)
def torch_unbind(x):
    return torch.unbind(x, 1)


@case(A)
def torch_where_scalar(x):
    return torch.where(x > 0, x, 0.0)


@case(A)
def torch_rsqrt_erf(x):
    return torch.erf(x) + torch.rsqrt(x.abs() + 1)


@case(A)
def torch_logsumexp(x):
    return torch.logsumexp(x, dim=1)


@case(A)
def torch_var_mean(x):
    return torch.var_mean(x, dim=1)


@case(A)
def torch_cumprod(x):
    return torch.cumprod(x, 1)


@case(A)
def torch_tril_indices_free(x):
    return torch.tril(torch.ones(4, 4)) @ x.t()


@case(A)
def torch_broadcast_tensors(x):
    a, b = torch.broadcast_tensors(x, x[0])
    return a + b


@case(A)
def torch_dtype_query(x):
    return x.to(torch.promote_types(torch.float32, torch.float64))


@case(A)
def torch_finfo(x):
    return (
        x.clamp(min=torch.finfo(x.dtype).min, max=torch.finfo(x.dtype).max)
        + torch.finfo(torch.float16).eps
    )


@case(A)
def torch_is_tensor(x):
    return x + 1 if torch.is_tensor(x) else x


@case(A)
def torch_numel_fn(x):
    return x * torch.numel(x)


@case(A)
def torch_rand_seeded(x):
    return x + torch.rand(x.shape)


@case(A)
def torch_randn_like(x):
    return torch.randn_like(x) * 0 + x


@case(A)
def torch_get_default_dtype(x):
    return x.to(torch.get_default_dtype())


@case(A)
def torch_cdist(x):
    return torch.cdist(x, x)


@case(A)
def torch_diag(x):
    return torch.diag(x[:, :3] if x.shape[0] >= 3 else x) if False else torch.diagonal(x)


# ---------------------------------------------------------------- torch.nn.functional
@case(A)
def f_relu_gelu(x):
    return F.relu(x) + F.gelu(x) + F.silu(x)


@case(A)
def f_gelu_tanh(x):
    return F.gelu(x, approximate="tanh")


@case(A)
def f_leaky_elu(x):
    return F.leaky_relu(x, 0.2) + F.elu(x)


@case(A)
def f_softmax(x):
    return F.softmax(x, dim=-1) + F.log_softmax(x, dim=0)


@case(
    lambda g, v: (
        torch.randn(3 + v, 4, generator=g),
        torch.randn(5, 4, generator=g),
        torch.randn(5, generator=g),
    )
)
def f_linear(x, w, b):
    return F.linear(x, w, b)


@case(lambda g, v: (torch.randn(3 + v, 4, generator=g), torch.randn(5, 4, generator=g)))
def f_linear_nobias(x, w):
    return F.linear(x, w)


@case(A)
def f_layer_norm(x):
    return F.layer_norm(x, (4,))


@case(
    lambda g, v: (
        torch.randn(3 + v, 4, generator=g),
        torch.randn(4, generator=g),
        torch.randn(4, generator=g),
    )
)
def f_layer_norm_affine(x, w, b):
    return F.layer_norm(x, (x.shape[-1],), w, b, 1e-5)


@case(A)
def f_dropout_eval(x):
    return F.dropout(x, p=0.5, training=False)


@case(A)
def f_dropout_train(x):
    return F.dropout(x, p=0.3, training=True)


@case(A)
def f_normalize(x):
    return F.normalize(x, dim=1)


@case(lambda g, v: (torch.randn(2 + v, 3, 8, 8, generator=g), torch.randn(4, 3, 3, 3, generator=g)))
def f_conv2d(x, w):
    return F.conv2d(x, w, padding=1)


@case(inp((2, 3, 8, 8)))
def f_pools(x):
    return F.max_pool2d(x, 2) + F.avg_pool2d(x, 2)


@case(inp((2, 3, 8, 8)))
def f_adaptive_pool(x):
    return F.adaptive_avg_pool2d(x, (1, 1)).flatten(1)


@case(inp((2, 3, 8, 8)))
def f_interpolate(x):
    return F.interpolate(x, scale_factor=2, mode="nearest")


@case(inp((2, 3, 4)))
def f_pad(x):
    return F.pad(x, (1, 2))


@case(inp((4, 5), (4, 1)))
def f_mse(x, y):
    return F.mse_loss(x[:, 0], y[:, 0])


@case(lambda g, v: (torch.randn(4 + v, 5, generator=g), torch.randint(0, 5, (4 + v,), generator=g)))
def f_cross_entropy(x, t):
    return F.cross_entropy(x, t)


@case(lambda g, v: (torch.randint(0, 10, (3 + v, 4), generator=g), torch.randn(10, 6, generator=g)))
def f_embedding(ids, w):
    return F.embedding(ids, w)


@case(inp((2, 4, 6, 8), (2, 4, 6, 8), (2, 4, 6, 8), grow=0))
def f_sdpa(q, k, v):
    return F.scaled_dot_product_attention(q, k, v)


@case(inp((2, 4, 6, 8), (2, 4, 6, 8), (2, 4, 6, 8), grow=0))
def f_sdpa_causal(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


@case(A)
def f_one_hot_free(x):
    return F.softplus(x) + F.hardtanh(x) + F.mish(x)


@case(inp((2, 6)))
def f_glu(x):
    return F.glu(x, dim=-1)


@case(inp((3, 4, 5)))
def f_group_norm(x):
    return F.group_norm(x, 2)


@case(A)
def f_cosine_sim(x):
    return F.cosine_similarity(x, x.flip(0), dim=1)
