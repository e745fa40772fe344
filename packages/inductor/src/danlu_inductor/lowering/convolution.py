"""Convolutions, and the memory layout of a graph that has them.

Library convolutions run fastest on channels-last operands: oneDNN (CPU) and cuDNN (GPU)
convert NCHW inputs, weights and results to and from their own channels-last formats around
every call, which costs as much as a third of a small CNN's step. A graph with 2-D
convolutions therefore keeps its image-shaped values channels-last ("layout choice"):

- each convolution (and convolution backward) reads its activations channels-last (its
  weights as they are: the library reorders them for itself); a value still in loops is
  stored that way directly, a stored one (the input image) is copied once per call;
- a 4-D value between convolutions is stored channels-last when it is stored at all (the
  batch norm + ReLU after a convolution, a residual sum), so no copy is needed in between:
  the values that feed a convolution, through any chain of ops, and the values computed
  from a convolution's result, up to the graph's last convolution;
- values the caller sees keep eager's strides (graph outputs, see ``GraphLowering``);
  values saved for the backward take the layout chosen here, and the backward is compiled
  for it (``CompiledGraph.output_strides``, read by danlu_aotautograd).

On by default on CUDA (cuDNN), for inference and training graphs; on the CPU (oneDNN) for
inference graphs (``_inference_graph``) whose convolutions' weights are smaller than their
activations (``_weights_smaller_than_activations``). ``DANLU_CONV_CHANNELS_LAST=1`` forces it on for every graph
with 2-D convolutions, ``=0`` off. Graphs with symbolic sizes keep the trace's layouts.
"""

from __future__ import annotations

import os

import torch
from torch import fx

from danlu_inductor.ir.layout import strides_for_order
from danlu_inductor.ir.nodes import (
    Buffer,
    Pointwise,
    ReinterpretView,
    StorageBox,
    View,
    current_graph,
    realize_input,
)
from danlu_inductor.ir.ops import ops
from danlu_inductor.lowering.extern import make_extern
from danlu_inductor.lowering.reductions import sum_
from danlu_inductor.lowering.registry import aten, is_node, make_pointwise, register
from danlu_inductor.lowering.views import view

CONV_OPS = (aten.convolution.default, aten.convolution_backward.default)
# a matmul's operands are reshaped 3-D views: a channels-last preference does not pass through.
# Nor does it pass a permutation: ConvNeXt's `x.permute(0, 2, 3, 1)` of a channels-last
# convolution output is a contiguous (N, H, W, C) value, whose own "channels-last" order would
# put H innermost (its layer norm then stored across rows, and its matmul read a copy).
_STOPS = (
    aten.bmm.default,
    aten.mm.default,
    aten.addmm.default,
    aten.baddbmm.default,
    aten.permute.default,
    aten.transpose.int,
)


def _is_conv2d(node: fx.Node) -> bool:
    if node.op != "call_function" or node.target not in CONV_OPS:
        return False
    val = node.args[0].meta.get("val") if isinstance(node.args[0], fx.Node) else None
    return isinstance(val, torch.Tensor) and val.dim() == 4


def wants_channels_last(gm: fx.GraphModule, device: torch.device) -> bool:
    """Whether the graph on ``device`` takes the channels-last layout choice."""
    setting = os.environ.get("DANLU_CONV_CHANNELS_LAST", "")
    if setting == "0" or gm.meta.get("shape_env") is not None:
        return False
    if not any(_is_conv2d(n) for n in gm.graph.nodes):
        return False
    if setting == "1":
        return device.type in ("cpu", "cuda")
    if device.type == "cpu":
        mkldnn = torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled
        return mkldnn and _inference_graph(gm) and _weights_smaller_than_activations(gm)
    return device.type == "cuda"


def _inference_graph(gm: fx.GraphModule) -> bool:
    """Neither a training step's forward (it saves values for a backward) nor a backward.
    On the CPU only these take the choice by default: MobileViT-style training fell to 0.69x
    of eager from 0.88x with it (MobileNetV3 gained 5%). On CUDA training graphs take it too
    since their per-channel statistics, which reduce over a strided dim in channels-last,
    run as outer reductions (H200, bf16, training: ResNet-50 0.91x -> 1.05x of eager,
    ConvNeXt-T 1.09x -> 1.29x, the NCHW <-> NHWC conversions around cuDNN gone)."""
    if gm.meta.get("saved_for_backward_from") is not None:
        return False
    return not any(n.target is CONV_OPS[1] for n in gm.graph.nodes)


def _numel(node) -> int:
    val = node.meta.get("val") if isinstance(node, fx.Node) else None
    return val.numel() if isinstance(val, torch.Tensor) else 0


def _weights_smaller_than_activations(gm: fx.GraphModule) -> bool:
    """oneDNN reorders an NCHW weight for a channels-last convolution on every call, into
    fresh memory: that pays only where the activations it saves converting outweigh the
    weights (MobileNet-style depthwise networks, large images), not in ResNet-style stacks of
    wide 3x3 convolutions at small batch (measured: ResNet-18 at batch 2 0.8x, MobileNetV3
    1.1x of the NCHW graph)."""
    weights = activations = 0
    for n in gm.graph.nodes:
        if _is_conv2d(n):
            weights += _numel(n.args[1]) if n.target is CONV_OPS[0] else _numel(n.args[2])
            activations += _numel(n.args[0])
    return weights < activations


def _image_like(node: fx.Node) -> bool:
    # a tuple of them too: max pooling returns its values and their indices
    val = node.meta.get("val")
    if isinstance(val, (tuple, list)) and val:
        val = val[0]
    return isinstance(val, torch.Tensor) and val.dim() == 4


def nodes_preferring_channels_last(gm: fx.GraphModule) -> set[fx.Node]:
    """The convolutions, the 4-D values that reach one (walking back through users), and the
    4-D values computed from those, up to the last convolution (after it, a vision
    transformer's or a classifier's tensors keep their own layouts)."""
    prefer: set[fx.Node] = set()
    nodes = list(gm.graph.nodes)
    last_conv = None
    for n in reversed(nodes):
        if _is_conv2d(n):
            prefer.add(n)
            last_conv = last_conv or n
        elif (
            n.target not in _STOPS
            and _image_like(n)
            and any(u in prefer and u.target not in _STOPS for u in n.users)
        ):
            prefer.add(n)
    for n in nodes:
        if n is last_conv:
            break
        if n in prefer:
            for u in n.users:
                if u.target not in _STOPS and _image_like(u):
                    prefer.add(u)
    return prefer


# ops whose result has its first same-shaped input's memory order in eager (TensorIterator)
_ORDER_KEEPING = (aten.clone.default, aten._to_copy.default)


def _static_shape(node) -> list | None:
    val = node.meta.get("val") if isinstance(node, fx.Node) else None
    if not isinstance(val, torch.Tensor) or not all(type(s) is int for s in val.shape):
        return None
    return list(val.shape)


def memory_orders(gm: fx.GraphModule, prefer: set[fx.Node]) -> dict[fx.Node, list]:
    """The strides that values computed from a permutation of a channels-last value would
    have if eager had run with this graph's layouts: a permutation permutes its input's
    strides, and a pointwise op (a clone, a cast) follows its first input of the same shape
    that has an entry here. Eager's own strides say the opposite after a permutation:
    ConvNeXt's `LayerNorm2d` permutes an NCHW convolution output to (N, H, W, C), strided
    NCHW in eager but contiguous here, where the convolution wrote it channels-last. Stored
    with eager's strides, the normalized value saved for the backward was written, and read
    back, across the channels; the backward's kernel that read it took 1.03 ms of ConvNeXt-T's
    step on the H100. Values reached otherwise keep eager's strides (a classifier's tail
    after the last convolution, see ``nodes_preferring_channels_last``)."""
    channels_last: dict[fx.Node, list] = {}
    orders: dict[fx.Node, list] = {}
    for n in gm.graph.nodes:
        if n.op != "call_function":
            continue
        shape = _static_shape(n)
        if shape is None:
            continue
        if n in prefer and len(shape) == 4:
            if n.target in CONV_OPS or _keeps_order(n):
                channels_last[n] = channels_last_strides(shape)
            continue
        if n.target is aten.permute.default:
            src = orders.get(n.args[0]) or channels_last.get(n.args[0])
            if src is not None:
                orders[n] = [src[d % len(src)] for d in n.args[1]]
        elif _keeps_order(n):
            for a in n.args:
                if isinstance(a, fx.Node) and a in orders and _static_shape(a) == shape:
                    orders[n] = orders[a]
                    break
    return orders


def _keeps_order(node: fx.Node) -> bool:
    target = node.target
    return target in _ORDER_KEEPING or torch.Tag.pointwise in getattr(target, "tags", ())


def channels_last_strides(size) -> list:
    # innermost first: channels, width, height, batch
    return strides_for_order(size, [3, 0, 2, 1])


def require_channels_last(x):
    """``x`` (a 4-D IR value) as a buffer or strided view laid out channels-last: stored
    that way if it is still loops, else copied."""
    if not is_node(x) or len(x.get_size()) != 4:
        return x
    stride = channels_last_strides(x.get_size())
    if isinstance(x, StorageBox) and not x.is_realized():
        return x.realize(stride)
    if isinstance(x, View):
        box = x.storage_box()
        if isinstance(box, StorageBox) and not box.is_realized() and box.get_size() == x.get_size():
            box.realize(stride)
    out = realize_input(x)
    if isinstance(out, (Buffer, ReinterpretView)) and out.layout.has_strides(stride):
        return out
    copy = StorageBox(Pointwise(x.get_dtype(), x.get_size(), x.make_loader()))
    return copy.realize(stride)


def _lower_conv(op, positions):
    @register(op)
    def lower(*args, **kwargs):
        graph = current_graph()
        args = list(args)
        grad = args[0]  # before its layout is chosen: a value loops can read
        if getattr(graph, "conv_channels_last", False):
            for i in positions:
                args[i] = require_channels_last(args[i])
        if op is aten.convolution.default and getattr(graph, "for_gpu", False):
            return _conv_then_bias(op, args, kwargs)
        if op is aten.convolution_backward.default and getattr(graph, "for_gpu", False):
            return _conv_backward_then_bias_grad(op, args, kwargs, grad)
        return make_extern(op, args, kwargs, "extern")

    return lower


def _conv_backward_then_bias_grad(op, args, kwargs, grad):
    """A GPU convolution backward that also wants the bias's gradient: the library computes
    the input's and weight's gradients, and the bias's (the output gradient summed over all
    but the channel dim) is a reduction here, which joins the kernel that makes the output
    gradient or the other per-channel sums over it. ATen sums a channels-last bf16 gradient
    in a kernel of its own per convolution (ConvNeXt-T's 22: 0.94 ms a training step on the
    H100, against 0.19 ms in torch.compile's)."""
    if kwargs or len(args) != 11 or not hasattr(grad, "make_loader"):
        return make_extern(op, args, kwargs, "extern")
    mask = list(args[10])
    if not mask[2] or args[3] is None:  # no bias sizes: the library's own answer
        return make_extern(op, args, kwargs, "extern")
    args = [*args[:10], [mask[0], mask[1], False]]
    if mask[0] or mask[1]:
        grad_input, grad_weight, _ = make_extern(op, args, kwargs, "extern")
    else:
        grad_input = grad_weight = None
    dims = [d for d in range(len(grad.get_size())) if d != 1]
    # eager's sum: float accumulation, the result in the gradient's dtype
    return grad_input, grad_weight, sum_(grad, dims)


def _conv_then_bias(op, args, kwargs):
    """A GPU convolution with a bias: the library convolution without it, and the bias added
    in a pointwise node, which fuses into whatever reads the result. cuDNN has no bias in its
    convolution kernels; ATen adds it afterwards in a kernel of its own, one extra pass over
    every convolution's output (22 launches, a tenth of ConvNeXt-T's inference step on the
    H200). On the CPU oneDNN adds the bias inside the convolution, so it stays there."""
    bias = args[2] if len(args) > 2 else kwargs.get("bias")
    if not is_node(bias):
        return make_extern(op, args, kwargs, "extern")
    if len(args) > 2:
        args[2] = None
    else:
        kwargs = {**kwargs, "bias": None}
    out = make_extern(op, args, kwargs, "extern")
    # the bias as [C, 1, ...]: broadcast over the result's channel dim; eager rounds the
    # convolution's result to its dtype before adding the bias, as here
    channels = [bias.get_size()[0]] + [1] * (len(out.get_size()) - 2)
    return make_pointwise([out, view(bias, channels)], ops.add, out.get_dtype())


# convolution(input, weight, ...); convolution_backward(grad_output, input, weight, ...).
# Activations only: a channels-last input makes the library's result channels-last whatever
# the weight's layout, and the library reorders weights for itself anyway, so converting
# them each call would be a copy of every weight for nothing (measured on oneDNN: slower).
_lower_conv(aten.convolution.default, (0,))
_lower_conv(aten.convolution_backward.default, (0, 1))
