/* danlu_inductor._buffers: the generated wrapper's views and allocations, made without torch's
 * Python argument parsing.
 *
 * A wrapper makes hundreds of tensors a call: a view of a buffer for each library argument
 * that is not the buffer as it is (T5's training step: about 580), and a new buffer for each
 * kernel result that reuses none (about 440). Through ``torch.as_strided`` and
 * ``torch.empty_strided`` each costs about 1.1 us of host time, most of it parsing arguments
 * and dispatching; here a view is a new tensor over the same storage (no dispatch at all) and
 * an allocation is one ``at::empty_strided`` call.
 *
 *   view(t, size, stride, offset): t's storage seen with these sizes and strides, starting
 *     ``offset`` elements after t's own first element. The view carries no autograd history
 *     and has its own version counter: it is for the wrapper's library arguments, read inside
 *     the compiled graph, never for a graph's outputs or for an argument a call writes.
 *   empty(size, stride, dtype, device): ``torch.empty_strided(size, stride, dtype=dtype,
 *     device=device)``.
 *
 * Whatever is not read plainly here (not one of the tensor types given to ``bind``, Python
 * dispatch, a torch-function mode on, a negative size or stride, a view past the end of the
 * storage, an argument of another type) goes to the Python fallbacks given to ``bind``, which
 * call torch and raise its errors. Built only where torch's headers are present at install
 * (setup.py), against that torch; ``TORCH_VERSION`` says which.
 */
#include <Python.h>

#include <ATen/ATen.h>
#include <ATen/PythonTorchFunctionTLS.h>
#include <torch/csrc/Device.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>

#include <vector>

#include "extension.h"

namespace {

PyObject *view_fallback = nullptr; /* view(t, size, stride, offset) through torch */
PyObject *empty_fallback = nullptr; /* empty(size, stride, dtype, device) through torch */

/* The ints of a tuple into out; false (no Python error set) where it is not a tuple of
 * non-negative ints that fit. */
bool read_ints(PyObject *tuple, std::vector<int64_t> &out)
{
    if (!PyTuple_Check(tuple))
        return false;
    Py_ssize_t n = PyTuple_GET_SIZE(tuple);
    out.resize(n);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = PyTuple_GET_ITEM(tuple, i);
        if (!PyLong_CheckExact(v))
            return false;
        int overflow = 0;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (overflow || x < 0)
            return false;
        out[i] = x;
    }
    return true;
}

PyObject *fall_back(PyObject *fallback, PyObject *const *a, Py_ssize_t nargs)
{
    if (fallback == nullptr) {
        PyErr_SetString(PyExc_RuntimeError, "danlu_inductor._buffers: bind() was not called");
        return nullptr;
    }
    return PyObject_Vectorcall(fallback, a, nargs, nullptr);
}

PyObject *b_view(PyObject *, PyObject *const *a, Py_ssize_t nargs)
{
    if (nargs != 4 || at::impl::torch_function_mode_enabled() || !plain_type(a[0]) ||
        !THPVariable_Check(a[0]) || !PyLong_CheckExact(a[3]))
        return fall_back(view_fallback, a, nargs);
    std::vector<int64_t> size, stride;
    if (!read_ints(a[1], size) || !read_ints(a[2], stride) || size.size() != stride.size())
        return fall_back(view_fallback, a, nargs);
    int overflow = 0;
    long long offset = PyLong_AsLongLongAndOverflow(a[3], &overflow);
    if (overflow || offset < 0)
        return fall_back(view_fallback, a, nargs);
    HANDLE_TH_ERRORS
    const at::Tensor &base = THPVariable_Unpack(a[0]);
    c10::TensorImpl *impl = base.unsafeGetTensorImpl();
    if (impl->is_python_dispatch() || !base.has_storage() || base.is_sparse())
        return fall_back(view_fallback, a, nargs);
    const c10::Storage &storage = impl->unsafe_storage();
    int64_t start = base.storage_offset() + offset;
    /* the last element the view reaches must lie in the storage (torch.as_strided's check) */
    int64_t last = start;
    bool empty = false;
    for (size_t i = 0; i < size.size(); i++) {
        if (size[i] == 0)
            empty = true;
        else
            last += (size[i] - 1) * stride[i];
    }
    int64_t item = static_cast<int64_t>(base.dtype().itemsize());
    if (!empty && (last + 1) * item > static_cast<int64_t>(storage.nbytes()))
        return fall_back(view_fallback, a, nargs);
    at::Tensor view = at::detail::make_tensor<c10::TensorImpl>(c10::Storage(storage),
                                                               base.key_set(), base.dtype());
    c10::TensorImpl *vi = view.unsafeGetTensorImpl();
    vi->set_sizes_and_strides(size, stride, start);
    return THPVariable_Wrap(std::move(view));
    END_HANDLE_TH_ERRORS
}

PyObject *b_empty(PyObject *, PyObject *const *a, Py_ssize_t nargs)
{
    if (nargs != 4 || !THPDtype_Check(a[2]) || !THPDevice_Check(a[3]))
        return fall_back(empty_fallback, a, nargs);
    std::vector<int64_t> size, stride;
    if (!read_ints(a[0], size) || !read_ints(a[1], stride) || size.size() != stride.size())
        return fall_back(empty_fallback, a, nargs);
    HANDLE_TH_ERRORS
    auto options = at::TensorOptions()
                       .dtype(reinterpret_cast<THPDtype *>(a[2])->scalar_type)
                       .device(reinterpret_cast<THPDevice *>(a[3])->device);
    at::Tensor t;
    {
        pybind11::gil_scoped_release no_gil; /* a CUDA allocation may wait on the driver */
        t = at::empty_strided(size, stride, options);
    }
    return THPVariable_Wrap(std::move(t));
    END_HANDLE_TH_ERRORS
}

PyObject *b_bind(PyObject *, PyObject *const *a, Py_ssize_t nargs)
{
    if (nargs != 3 || !PyTuple_Check(a[0]) || !PyCallable_Check(a[1]) || !PyCallable_Check(a[2])) {
        PyErr_SetString(PyExc_TypeError,
                        "bind takes the plain tensor types (a tuple), the view fallback and "
                        "the empty fallback");
        return nullptr;
    }
    Py_INCREF(a[0]);
    Py_XSETREF(plain_types, a[0]);
    Py_INCREF(a[1]);
    Py_XSETREF(view_fallback, a[1]);
    Py_INCREF(a[2]);
    Py_XSETREF(empty_fallback, a[2]);
    Py_RETURN_NONE;
}

PyMethodDef b_methods[] = {
    {"bind", fastcall(b_bind), METH_FASTCALL,
     "bind(types, view_fallback, empty_fallback): the tensor types viewed here, and the "
     "Python functions that answer what is not."},
    {"view", fastcall(b_view), METH_FASTCALL,
     "view(t, size, stride, offset) -> t's storage with these sizes and strides, from offset "
     "elements after t's first element; no autograd history."},
    {"empty", fastcall(b_empty), METH_FASTCALL,
     "empty(size, stride, dtype, device) -> torch.empty_strided(size, stride, dtype=dtype, "
     "device=device)."},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef b_module = {PyModuleDef_HEAD_INIT, "danlu_inductor._buffers",
                        "The generated wrapper's views and allocations.", -1, b_methods};

} // namespace

PyMODINIT_FUNC PyInit__buffers(void)
{
    return create_module(&b_module);
}
