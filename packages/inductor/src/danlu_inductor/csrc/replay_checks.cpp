/* danlu_inductor._replay_checks: the CUDA graph replay's address check, read from the tensors.
 *
 * Before each replay the runner checks that every input read in place (a model's parameters
 * and buffers: ResNet-50 has 320) still has the address captured. Through torch's Python
 * ``data_ptr()`` that is about 80 ns a tensor (a torch-function check and a new int each);
 * here it is the tensor's own data pointer.
 *
 * Built only where torch's headers are present at install (setup.py), against that torch;
 * ``TORCH_VERSION`` says which, and cudagraphs.py uses the module only with that torch. A
 * tensor it cannot read plainly (not a torch tensor, Python dispatch, a type with its own
 * ``__torch_function__``, a torch-function mode on, anything that throws) makes it answer
 * None, and the caller asks ``data_ptr()`` as before.
 */
#include <Python.h>

#include <ATen/PythonTorchFunctionTLS.h>
#include <torch/csrc/autograd/python_variable.h>

#include "extension.h"

namespace {

/* same_addresses(args, order, ptrs) -> True/False/None: ``args[order[k]].data_ptr() ==
 * ptrs[k]`` for every k; None where some tensor is not read here. */
PyObject *rc_same_addresses(PyObject *, PyObject *const *a, Py_ssize_t nargs)
{
    if (nargs != 3 || !PyTuple_Check(a[0]) || !PyTuple_Check(a[1]) || !PyTuple_Check(a[2]) ||
        PyTuple_GET_SIZE(a[1]) != PyTuple_GET_SIZE(a[2])) {
        PyErr_SetString(PyExc_TypeError,
                        "same_addresses takes three tuples: args, order, ptrs (as long)");
        return nullptr;
    }
    if (at::impl::torch_function_mode_enabled())
        Py_RETURN_NONE;
    Py_ssize_t n_args = PyTuple_GET_SIZE(a[0]), n = PyTuple_GET_SIZE(a[1]);
    bool same = true;
    for (Py_ssize_t k = 0; k < n; k++) {
        Py_ssize_t i = PyLong_AsSsize_t(PyTuple_GET_ITEM(a[1], k));
        if (i == -1 && PyErr_Occurred())
            return nullptr;
        if (i < 0 || i >= n_args) {
            PyErr_SetString(PyExc_IndexError, "same_addresses: an index past the arguments");
            return nullptr;
        }
        PyObject *t = PyTuple_GET_ITEM(a[0], i);
        if (!plain_type(t) || !THPVariable_Check(t))
            Py_RETURN_NONE;
        void *ptr;
        try {
            const at::Tensor &tensor = THPVariable_Unpack(t);
            if (tensor.unsafeGetTensorImpl()->is_python_dispatch())
                Py_RETURN_NONE;
            ptr = tensor.data_ptr();
        } catch (...) {
            Py_RETURN_NONE;
        }
        void *want = PyLong_AsVoidPtr(PyTuple_GET_ITEM(a[2], k));
        if (want == nullptr && PyErr_Occurred())
            return nullptr;
        if (ptr != want)
            same = false; /* go on: a tensor further on may need the Python answer */
    }
    return PyBool_FromLong(same);
}

PyObject *rc_bind(PyObject *, PyObject *types)
{
    if (!PyTuple_Check(types)) {
        PyErr_SetString(PyExc_TypeError, "bind takes a tuple of tensor types");
        return nullptr;
    }
    Py_INCREF(types);
    Py_XSETREF(plain_types, types);
    Py_RETURN_NONE;
}

PyMethodDef rc_methods[] = {
    {"bind", rc_bind, METH_O,
     "bind(types): the tensor types whose data pointers are read directly (their Python "
     "data_ptr() is torch's)."},
    {"same_addresses", fastcall(rc_same_addresses), METH_FASTCALL,
     "same_addresses(args, order, ptrs) -> bool or None: every args[order[k]].data_ptr() == "
     "ptrs[k]; None where a tensor is not read here."},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef rc_module = {PyModuleDef_HEAD_INIT, "danlu_inductor._replay_checks",
                         "The CUDA graph replay's address check, read from the tensors.", -1,
                         rc_methods};

} // namespace

PyMODINIT_FUNC PyInit__replay_checks(void)
{
    return create_module(&rc_module);
}
