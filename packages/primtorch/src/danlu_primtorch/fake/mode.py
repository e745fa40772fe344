"""FakeTensorMode: run every ATen op on metadata only.

Inside ``with FakeTensorMode():`` factory functions return fake tensors (on any device, CUDA
included, without a GPU) and ops on fake tensors run their meta kernels. The mode is an "infra"
dispatch mode (the FAKE slot of the dispatch-mode stack): user modes such as the tracer sit
above it and see each op first, then hand it down here.
"""

from __future__ import annotations

import itertools

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map, tree_unflatten
from torch.utils.weak import WeakIdKeyDictionary

from .conv_layout import restride_conv_output
from .data_factories import DataFactoryDeviceMode
from .devices import normalize_device, output_device
from .errors import DataDependentOutputError, FakeTensorMixingError, UnsupportedFakeOp
from .fallback import run_on_zeros
from .symbolic_dispatch import SIZE_QUERIES, answer_size_query, run_symbolic
from .symbolic_inputs import has_symbolic_sizes, normalize_dims, symbolic_fake
from .tensor import FakeTensor, kernel_invocation

aten = torch.ops.aten

_FAKE_KEY = torch._C._TorchDispatchModeKey.FAKE
_META = torch.device("meta")
_DATA_DEPENDENT_TAGS = (torch.Tag.data_dependent_output, torch.Tag.dynamic_output_shape)

# Ops that take a fresh real tensor (``torch.tensor(...)`` data) into the mode.
_LIFT_OPS = {aten.lift_fresh.default, aten.lift_fresh_copy.default, aten.lift.default}
_INDEX_PUT_OPS = {aten.index_put_.default, aten.index_put.default, aten._index_put_impl_.default}


_CPU_NORM_STATS = {
    aten.native_layer_norm.default,
    aten.native_batch_norm.default,
    aten._native_batch_norm_legit.default,
    aten._native_batch_norm_legit.no_stats,
    aten._native_batch_norm_legit_no_training.default,
    aten._batch_norm_with_update.default,
}


def _bn_training(func, args) -> bool:
    if func is aten._batch_norm_with_update.default:
        return True
    if func is aten._native_batch_norm_legit_no_training.default:
        return False
    if func is aten._native_batch_norm_legit.no_stats:
        return bool(args[3])
    return bool(args[5])


def _takes_device(func) -> bool:
    return any(a.name == "device" and a.kwarg_only for a in func._schema.arguments)


def _is_mask(t) -> bool:
    return isinstance(t, torch.Tensor) and t.dtype in (torch.bool, torch.uint8)


class FakeTensorMode(TorchDispatchMode):
    """A dispatch mode in which tensors carry metadata only.

    ``allow_non_fake_inputs``: convert real tensors that reach an op (for example module
    parameters captured by a function) with ``from_real`` instead of raising
    ``FakeTensorMixingError``. Real CPU 0-dim tensors are always converted, as eager mixes
    them with any device.
    ``allow_fallback``: ops without a meta kernel run on zero-filled CPU tensors when safe
    (see ``fallback.py``); otherwise they raise ``UnsupportedFakeOp``.

    Entering the mode also turns off the autograd engine's device threads, so backward passes
    over fake tensors run on the calling thread, where this mode (and a tracer above it) live.
    The mode keeps the real tensors (and storages) it converted alive while it lives.
    """

    _mode_key = _FAKE_KEY

    def __init__(
        self,
        *,
        allow_non_fake_inputs: bool = False,
        allow_fallback: bool = True,
        shape_env=None,
    ):
        super().__init__()
        self.shape_env = shape_env
        self.allow_non_fake_inputs = allow_non_fake_inputs
        self.allow_fallback = allow_fallback
        self._real_to_fake = WeakIdKeyDictionary()
        self._real_to_dynamic = WeakIdKeyDictionary()  # tensor -> {(dims, source): fake}
        self._sources = itertools.count()
        self._storages: dict[int, tuple[torch.UntypedStorage, torch.UntypedStorage]] = {}
        self._entered: list[tuple[bool, bool, DataFactoryDeviceMode | None]] = []
        self._last_device = torch.device("cpu")

    # --- entering ----------------------------------------------------------------------------
    def __enter__(self):
        prev_mt = torch._C._is_multithreading_enabled()
        torch._C._set_multithreading_enabled(False)
        if torch._C._get_dispatch_mode(_FAKE_KEY) is self:  # re-entered: already active
            self._entered.append((False, prev_mt, None))
            return self
        try:
            super().__enter__()
        except BaseException:
            torch._C._set_multithreading_enabled(prev_mt)
            raise
        factories = DataFactoryDeviceMode()
        factories.__enter__()
        self._entered.append((True, prev_mt, factories))
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        pushed, prev_mt, factories = self._entered.pop()
        try:
            if factories is not None:
                factories.__exit__(exc_type, exc_val, exc_tb)
            if pushed:
                super().__exit__(exc_type, exc_val, exc_tb)
        finally:
            torch._C._set_multithreading_enabled(prev_mt)

    # --- real -> fake ------------------------------------------------------------------------
    def from_real(self, t: torch.Tensor, *, dynamic_dims=None, source=None) -> FakeTensor:
        """The fake twin of a real tensor: same size, strides, storage offset, dtype, device,
        requires_grad. Memoized: the same real tensor gives the same fake; tensors sharing a
        storage give fakes sharing one meta storage; a view gives a view of its base's fake.
        A real non-leaf that requires grad becomes a fake leaf that requires grad (unless it is
        a view, which stays a differentiable view of its base's fake).

        ``dynamic_dims`` (needs ``shape_env``): ``True`` / ``"all"`` or an iterable of dims whose
        sizes become symbols (``symbolic_fake``); ``source`` names the tensor in guards."""
        if isinstance(t, FakeTensor):
            return t
        if dynamic_dims is not None and dynamic_dims is not False:
            return self._dynamic_from_real(t, dynamic_dims, source)
        hit = self._real_to_fake.get(t)
        if hit is not None:
            return hit
        if t.layout != torch.strided or t.is_quantized or t.is_nested:
            raise UnsupportedFakeOp("from_real", f"only strided dense tensors, got {t.layout}")
        if t._is_view():
            base = self.from_real(t._base)
            with torch.set_grad_enabled(t.requires_grad and base.requires_grad):
                fake = base.as_strided(t.shape, t.stride(), t.storage_offset())
            if t.requires_grad and not fake.requires_grad:
                fake.requires_grad_(True)
        else:
            storage = t.untyped_storage()
            entry = self._storages.get(storage._cdata)
            if entry is None:
                entry = (storage, torch.UntypedStorage(storage.nbytes(), device="meta"))
                self._storages[storage._cdata] = entry
            with torch._C._DisableTorchDispatch():  # a plain meta tensor, even inside the mode
                meta = torch.empty((0,), dtype=t.dtype, device="meta")
                meta.set_(entry[1], t.storage_offset(), t.shape, t.stride())
            fake = FakeTensor(self, meta, normalize_device(t.device))
            if t.requires_grad:
                fake.requires_grad_(True)
        self._real_to_fake[t] = fake
        return fake

    def _dynamic_from_real(self, t, dynamic_dims, source) -> FakeTensor:
        if self.shape_env is None:
            raise ValueError("dynamic_dims needs FakeTensorMode(shape_env=ShapeEnv())")
        if t.layout != torch.strided or t.is_quantized or t.is_nested:
            raise UnsupportedFakeOp("from_real", f"only strided dense tensors, got {t.layout}")
        dims = normalize_dims(dynamic_dims, t.dim())
        if not dims:
            return self.from_real(t)
        source = source or f"input{next(self._sources)}"
        memo = self._real_to_dynamic.setdefault(t, {})
        key = (dims, source)
        if key not in memo:
            fake = symbolic_fake(self, t, dims, source)
            if t.requires_grad:
                fake.requires_grad_(True)
            memo[key] = fake
        return memo[key]

    def fake_empty(self, size, stride, dtype, device) -> FakeTensor:
        """A fresh fake tensor with the given metadata (no aliasing)."""
        with torch._C._DisableTorchDispatch():
            meta = torch.empty_strided(size, stride, dtype=dtype, device="meta")
        return FakeTensor(self, meta, normalize_device(device))

    # --- dispatch ----------------------------------------------------------------------------
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return self.dispatch(func, types, args, kwargs or {})

    def dispatch(self, func, types, args, kwargs):
        if func in SIZE_QUERIES:  # a C++ kernel asks a symbolic fake for concrete sizes
            return answer_size_query(self, func, args)
        flat, spec = tree_flatten((args, kwargs))
        explicit_device = None
        fakes = []
        for i, x in enumerate(flat):
            if isinstance(x, torch.Tensor):
                if not isinstance(x, FakeTensor):
                    x = flat[i] = self._convert_real_input(func, x)
                fakes.append(x)
            elif isinstance(x, torch.device):
                explicit_device = x
                flat[i] = _META
        self._check_data_independent(func, fakes, flat)
        if not fakes and explicit_device is not None and explicit_device.type == "meta":
            # C++ composites build factories from ``self.options()``, whose device is meta
            # for a fake tensor: such a factory belongs to the device last computed on.
            explicit_device = self._last_device
        device = output_device(func, fakes, explicit_device)
        if fakes:
            self._last_device = device
        args, kwargs = tree_unflatten(flat, spec)
        if not fakes and explicit_device is None and _takes_device(func):
            # A factory called without device= (e.g. scalar_tensor(0) in a decomposition):
            # eager makes it on the default device; build its metadata on meta.
            kwargs = {**kwargs, "device": _META}

        if func in _INDEX_PUT_OPS and any(_is_mask(i) for i in flat[1:] if i is not None):
            # Boolean-mask assignment keeps self's metadata; its meta kernel would need nonzero.
            out = args[0] if func._schema.is_mutable else self._like(args[0])
            return out

        symbolic = self.shape_env is not None and has_symbolic_sizes(fakes, flat)
        try:
            if symbolic:
                out = run_symbolic(self, func, args, kwargs)
            else:
                with kernel_invocation():
                    out = func(*args, **kwargs)
        except NotImplementedError as e:
            if symbolic:
                raise UnsupportedFakeOp(func, f"no meta kernel for symbolic sizes ({e})") from e
            if not self.allow_fallback:
                raise UnsupportedFakeOp(func, f"no meta kernel ({e})") from e
            return run_on_zeros(func, args, kwargs, lambda m: FakeTensor(self, m, device))

        if func is aten.convolution.default and not symbolic:
            out = restride_conv_output(out, args[0], args[1])
        if device.type == "cpu" and func in _CPU_NORM_STATS:
            out = self._cpu_norm_stats(func, args, out, device)

        inputs = {id(f) for f in fakes}

        def wrap(x):
            if isinstance(x, torch.Tensor) and not isinstance(x, FakeTensor):
                return FakeTensor(self, x, device)
            if (
                symbolic
                and isinstance(x, FakeTensor)
                and x.fake_device != device
                and id(x) not in inputs
            ):
                # a decomposition built it from the inputs (``_to_copy`` to another device):
                # a new tensor, on the device the op puts its result on
                x.fake_device = device
            return x

        return tree_map(wrap, out)

    def _cpu_norm_stats(self, func, args, out, device):
        # Meta kernels follow CUDA for the saved statistics of norms; eager CPU keeps them in
        # the input's reduced precision, and returns them empty for batch norm in eval mode.
        x = args[0]
        stats = list(out[1:3])
        if func is not aten.native_layer_norm.default and not _bn_training(func, args):
            stats = [self.fake_empty((0,), (1,), s.dtype, device) for s in stats]
        if x.dtype in (torch.bfloat16, torch.float16):
            stats = [self.fake_empty(s.shape, s.stride(), x.dtype, device) for s in stats]
        return (out[0], *stats, *out[3:])

    def _like(self, t: FakeTensor) -> FakeTensor:
        return self.fake_empty(t.shape, t.stride(), t.dtype, t.fake_device)

    def _convert_real_input(self, func, x: torch.Tensor) -> FakeTensor:
        if (
            self.allow_non_fake_inputs
            or func in _LIFT_OPS
            or (x.dim() == 0 and x.device.type == "cpu")
            or x.device.type == "meta"
        ):
            return self.from_real(x)
        raise FakeTensorMixingError(
            f"{func} got a real tensor (size {tuple(x.shape)}, {x.device}) inside "
            "FakeTensorMode; convert it with mode.from_real(t) first, or create the mode with "
            "allow_non_fake_inputs=True"
        )

    @staticmethod
    def _check_data_independent(func, fakes, flat):
        if func is aten.index.Tensor:
            # Tagged dynamic-output-shape for its boolean-mask form only: integer index
            # tensors give a shape known from metadata.
            if any(_is_mask(i) for i in flat[1:]):
                raise DataDependentOutputError(func, "boolean-mask indexing")
            return
        if any(tag in _DATA_DEPENDENT_TAGS for tag in func.tags):
            raise DataDependentOutputError(func)
