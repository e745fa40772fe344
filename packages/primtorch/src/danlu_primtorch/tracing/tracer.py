"""AtenTracer: a dispatch mode that records every ATen op it sees into an ``fx.Graph``.

The tracer sits on the dispatch-mode stack above a ``FakeTensorMode`` (or above the real
kernels). Each op that reaches it is, in order:

1. decomposed, if ``decomposition_for(func)`` returns a callable: the callable runs with the
   tracer active, so its own ATen calls are traced again (and may decompose further);
2. otherwise handed to ``intercept(func, args, kwargs)``, the hook subclasses override. The
   default records the op as it is: ``call(func, args, kwargs)`` runs it one level down and adds
   a ``call_function`` node whose ``meta["val"]`` is the (fake) result.

Tensors map to the nodes that produced them (``tensor_nodes``). Tensors the tracer has never
seen become constants: real ones are stored on the module and read with ``get_attr``; fake ones
are an error (a fake tensor carries no data to embed).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping

import torch
import torch.fx as fx
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map
from torch.utils.weak import WeakIdKeyDictionary

from ..fake import FakeTensor, FakeTensorMode
from .symbolic_values import SYM_TYPES, SymbolicValues


class TracingError(RuntimeError):
    """The traced function did something the tracer cannot represent."""


class AtenTracer(TorchDispatchMode):
    """Record ATen ops into ``self.graph``. Use as a context manager, or through ``trace``.

    ``fake_mode``: the FakeTensorMode the traced values live in (None when tracing real
    tensors). Real constants reaching an op are converted with ``fake_mode.from_real`` before
    the op runs. ``decompositions``: dict ``OpOverload -> callable``, applied while tracing.
    """

    def __init__(
        self,
        fake_mode: FakeTensorMode | None = None,
        decompositions: Mapping | None = None,
    ):
        super().__init__()
        self.fake_mode = fake_mode
        self.decompositions = dict(decompositions or {})
        self.graph = fx.Graph()
        self.root = torch.nn.Module()  # owns get_attr constants
        self.tensor_nodes: WeakIdKeyDictionary = WeakIdKeyDictionary()
        self.sym_values = SymbolicValues(self.graph)  # size symbols/expressions -> nodes
        self._names: set[str] = set()
        self._grad_guards: WeakIdKeyDictionary = WeakIdKeyDictionary()

    # --- hooks a subclass overrides --------------------------------------------------------
    def decomposition_for(self, func) -> Callable | None:
        """The decomposition to apply to ``func``, or None to keep it."""
        return self.decompositions.get(func)

    def intercept(self, func, args, kwargs):
        """Called for every op that is not decomposed; returns the op's result.

        Default: run the op and record it unchanged. A subclass may record something else
        (e.g. the functional twin of an in-place op) using ``call``, ``run`` and ``record``.
        """
        return self.call(func, args, kwargs)

    # --- building blocks ---------------------------------------------------------------------
    def run(self, func, args, kwargs):
        """Run ``func`` one level below the tracer (fake mode or real kernels); record nothing."""
        if self.fake_mode is not None:
            args, kwargs = tree_map(self._as_fake, (args, kwargs))
        return func(*args, **kwargs)

    def call(self, func, args, kwargs):
        """Run ``func`` and record it: the usual path for one op."""
        out = self.run(func, args, kwargs)
        self.record(func, args, kwargs, out)
        return out

    def record(self, func, args, kwargs, out) -> fx.Node:
        """Add a ``call_function`` node for ``func(*args, **kwargs)`` whose result is ``out``.

        Tensors in ``out`` are bound to the node (tuple results through ``getitem`` nodes), so
        later ops that use them refer to it. Returns the node.
        """
        node_args, node_kwargs = tree_map(self.node_arg, (args, kwargs))
        if self.fake_mode is not None:
            node_args, node_kwargs = _resolve_meta_devices(node_args, node_kwargs, out)
        node = self.graph.call_function(func, tuple(node_args), dict(node_kwargs))
        self.bind(node, out)
        return node

    def bind(self, node: fx.Node, value) -> None:
        """Set ``node.meta["val"]`` from ``value`` and map the tensors in it to ``node``."""
        node.meta["val"] = self.meta_value(value)
        if isinstance(value, torch.Tensor):
            self.tensor_nodes[value] = node
        elif isinstance(value, (tuple, list)):
            for i, v in enumerate(value):
                if isinstance(v, torch.Tensor):
                    item = self.graph.call_function(operator.getitem, (node, i))
                    self.bind(item, v)
                elif isinstance(v, (tuple, list)) and any(isinstance(e, torch.Tensor) for e in v):
                    item = self.graph.call_function(operator.getitem, (node, i))
                    self.bind(item, v)

    def placeholder(self, value, name: str | None = None) -> fx.Node:
        """A graph input standing for ``value`` (a tensor, or a Python scalar / None)."""
        node = self.graph.placeholder(self._fresh_name(name or "arg"))
        node.meta["val"] = self.meta_value(value)
        if isinstance(value, torch.Tensor):
            self.tensor_nodes[value] = node
        self.sym_values.register_input(node, value)
        return node

    def set_outputs(self, outputs) -> fx.Node:
        """Make ``outputs`` (any pytree of tensors and constants) the graph's result."""
        return self.graph.output(tree_map(self.node_arg, outputs))

    def node_arg(self, x):
        """The graph argument standing for a runtime value (tensors -> nodes, symbolic sizes
        -> the nodes computing them from the inputs)."""
        if isinstance(x, torch.Tensor):
            return self.node_of(x)
        if isinstance(x, SYM_TYPES):
            return self.sym_values.node_for(x)
        return x

    def node_of(self, t: torch.Tensor) -> fx.Node:
        """The node that produced tensor ``t``; an unseen real tensor becomes a constant."""
        node = self.tensor_nodes.get(t)
        if node is not None:
            return node
        if isinstance(t, FakeTensor):
            raise TracingError(
                f"{t} was neither an input of the traced function nor made inside it; pass "
                "fake tensors as inputs (they carry no data to embed as constants)"
            )
        return self.constant(t)

    def constant(self, t: torch.Tensor) -> fx.Node:
        """Store real tensor ``t`` on the module and return a ``get_attr`` node reading it."""
        if t.device.type == "meta" and self.fake_mode is not None:
            # e.g. the index tensor torch builds for ``x[[0, 2]]`` on a fake ``x``: it is made
            # on the meta device, so its values are gone and the graph could not be correct.
            raise TracingError(
                f"a constant tensor (size {tuple(t.shape)}, {t.dtype}) reached the trace on the "
                "meta device, so its values are unknown (an index list such as x[[0, 2]] does "
                "this under fake tracing); pass it as a tensor input instead"
            )
        name = self._fresh_name("_tensor_constant")
        setattr(self.root, name, t)
        node = self.graph.get_attr(name)
        node.meta["val"] = self.meta_value(t)
        self.tensor_nodes[t] = node
        return node

    def meta_value(self, value):
        """What ``node.meta["val"]`` holds for ``value``: fake tensors, scalars, tuples."""

        def one(x):
            if isinstance(x, torch.Tensor) and not isinstance(x, FakeTensor):
                return self._as_fake(x) if self.fake_mode is not None else self._meta_fake(x)
            return x

        return tree_map(one, value)

    def graph_module(self, class_name: str = "AtenGraph") -> fx.GraphModule:
        """The recorded graph as a GraphModule (call ``set_outputs`` first)."""
        return fx.GraphModule(self.root, self.graph, class_name)

    # --- dispatch ------------------------------------------------------------------------------
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        decomposition = self.decomposition_for(func)
        if decomposition is not None:
            with self:
                out = decomposition(*args, **kwargs)
            if out is not NotImplemented:
                return out
        return self.intercept(func, args, kwargs)

    # --- helpers -------------------------------------------------------------------------------
    def _as_fake(self, x):
        if isinstance(x, torch.Tensor) and not isinstance(x, FakeTensor):
            if x.requires_grad and x.is_leaf and x not in self._grad_guards:
                self._grad_guards[x] = x.register_hook(_refuse_fake_grad)
            return self.fake_mode.from_real(x)
        return x

    def close(self) -> None:
        """Remove the guards put on closed-over real tensors that require grad (``trace``
        calls this; call it after tracing by hand)."""
        for handle in list(self._grad_guards.values()):
            handle.remove()
        self._grad_guards = WeakIdKeyDictionary()

    _meta_mode: FakeTensorMode | None = None

    def _meta_fake(self, t: torch.Tensor) -> FakeTensor:
        # Real tracing still gives every node a fake ``val`` (the graph contract).
        if self._meta_mode is None:
            self._meta_mode = FakeTensorMode()
        return self._meta_mode.fake_empty(t.shape, t.stride(), t.dtype, t.device)

    def _fresh_name(self, base: str) -> str:
        i = 0
        name = base
        while name in self._names:
            i += 1
            name = f"{base}_{i}"
        self._names.add(name)
        return name


def _refuse_fake_grad(grad):
    # Autograd reaches a real tensor closed over by a function traced on fakes: its gradient
    # would be a fake tensor written into a real model. Say so instead.
    raise TracingError(
        "the traced function computes a gradient for a real tensor it closes over (e.g. a "
        "module parameter); on fake tensors that gradient has no data. Pass such tensors as "
        "inputs (torch.func.functional_call) or trace with fake=False"
    )


def _resolve_meta_devices(args, kwargs, out):
    # C++ fills ``device=`` from a fake tensor's options, which say meta; the graph must
    # name the device the value lives on (the output's fake device).
    first = next((t for t in tree_flatten(out)[0] if isinstance(t, FakeTensor)), None)
    if first is None or first.fake_device.type == "meta":
        return args, kwargs

    def fix(x):
        if isinstance(x, torch.device) and x.type == "meta":
            return first.fake_device
        return x

    return tree_map(fix, (args, kwargs))


def flat_inputs(args) -> list:
    """The graph inputs for ``args``: their pytree leaves, in order."""
    return tree_flatten(args)[0]
