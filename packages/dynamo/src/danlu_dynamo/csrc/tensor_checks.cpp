/* danlu_dynamo._tensor_checks: the tensor metadata guard, read from the tensor itself.
 *
 * ``_guard_checks.tensor_match`` calls torch's Python attribute getters; each costs about
 * 50 ns (a torch-function check, a new Python object, a comparison), seven a tensor, and a
 * model's guard tests one tensor per parameter and buffer (ResNet-50: 320). Here the same
 * answer comes from the tensor's own fields (sizes, strides, dtype, device, the negative and
 * conjugate bits, requires_grad) with no Python object made.
 *
 * Built only where torch's headers are present at install (setup.py), against that torch;
 * ``TORCH_VERSION`` says which, and the Python side uses the module only when it is the torch
 * imported. A tensor this cannot read plainly (a Python-dispatch or nested tensor, symbolic
 * sizes, a non-strided layout, a torch-function mode on, anything that throws) goes to the
 * getter-based test given to ``bind``, so the answer is always the getters'.
 *
 * ``tensors_are`` runs the test over a module's ``_parameters`` (or ``_buffers``) dict in one
 * call: the batched check (``guard_codegen._store_batches``) spends one Python line per module
 * instead of two per tensor.
 */
#include <Python.h>

#include <ATen/PythonTorchFunctionTLS.h>
#include <torch/csrc/Device.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/autograd/python_variable.h>

#ifndef DANLU_TORCH_VERSION
#define DANLU_TORCH_VERSION "unknown"
#endif

namespace {

PyObject *getter_test = nullptr; /* _guard_checks.tensor_match, from bind() */

/* 1: the tuple of ints ``expected`` equals ``values``, 0: not, -1: cannot tell here. */
int ints_equal(PyObject *expected, c10::IntArrayRef values)
{
    if (!PyTuple_Check(expected))
        return -1;
    Py_ssize_t n = PyTuple_GET_SIZE(expected);
    if (n != static_cast<Py_ssize_t>(values.size()))
        return 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyTuple_GET_ITEM(expected, i);
        if (!PyLong_CheckExact(item))
            return -1;
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(item, &overflow);
        if (overflow || (v == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            return -1;
        }
        if (v != values[i])
            return 0;
    }
    return 1;
}

/* 1: matches, 0: does not, -1: not readable here (use the getters). No Python error set. */
int direct_match(PyObject *const *args)
{
    PyObject *t = args[0];
    if (!THPVariable_Check(t) || !THPDtype_Check(args[2]))
        return -1;
    if (args[6] != Py_None && !THPDevice_Check(args[6]))
        return -1;
    if (at::impl::torch_function_mode_enabled())
        return -1; /* a mode sees the getters; it could answer otherwise */
    try {
        const at::Tensor &tensor = THPVariable_Unpack(t);
        c10::TensorImpl *impl = tensor.unsafeGetTensorImpl();
        if (impl->is_python_dispatch() || impl->is_nested() || impl->layout() != c10::kStrided ||
            impl->has_symbolic_sizes_strides())
            return -1;
        if (impl->dtype().toScalarType() != reinterpret_cast<THPDtype *>(args[2])->scalar_type)
            return 0;
        if (tensor.requires_grad() != (args[3] == Py_True))
            return 0;
        int r = ints_equal(args[4], impl->sizes());
        if (r != 1)
            return r;
        r = ints_equal(args[5], impl->strides());
        if (r != 1)
            return r;
        if (args[6] == Py_None) {
            if (!impl->is_cpu())
                return 0;
        } else if (impl->device() != reinterpret_cast<THPDevice *>(args[6])->device) {
            return 0;
        }
        if (impl->is_neg() != (args[7] == Py_True))
            return 0;
        if (args[8] != Py_None && impl->is_conj() != (args[8] == Py_True))
            return 0;
        return 1;
    } catch (...) {
        return -1;
    }
}

/* tensor_match(t, cls, dtype, requires_grad, shape, stride, device, is_neg, is_conj) -> bool,
 * with _guard_checks.tensor_match's arguments and answer. */
PyObject *tc_tensor_match(PyObject *, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 9) {
        PyErr_SetString(PyExc_TypeError, "tensor_match takes 9 arguments");
        return nullptr;
    }
    if (getter_test == nullptr) {
        PyErr_SetString(PyExc_RuntimeError, "tensor_match: bind() was not called");
        return nullptr;
    }
    if (reinterpret_cast<PyObject *>(Py_TYPE(args[0])) != args[1])
        Py_RETURN_FALSE;
    int r = direct_match(args);
    if (r < 0)
        return PyObject_Vectorcall(getter_test, args, static_cast<size_t>(nargs), nullptr);
    return PyBool_FromLong(r);
}

/* 1: ``t`` passes the test with ``spec`` (tensor_match's arguments after the tensor), 0: not,
 * -1: error set. */
int spec_match(PyObject *t, PyObject *spec)
{
    if (!PyTuple_Check(spec) || PyTuple_GET_SIZE(spec) != 8) {
        PyErr_SetString(PyExc_TypeError, "tensors_are: a spec is tensor_match's 8 arguments");
        return -1;
    }
    PyObject *args[9] = {t};
    for (Py_ssize_t i = 0; i < 8; i++)
        args[i + 1] = PyTuple_GET_ITEM(spec, i);
    if (reinterpret_cast<PyObject *>(Py_TYPE(t)) != args[1])
        return 0;
    int r = direct_match(args);
    if (r >= 0)
        return r;
    PyObject *v = PyObject_Vectorcall(getter_test, args, 9, nullptr);
    if (v == nullptr)
        return -1;
    r = PyObject_IsTrue(v);
    Py_DECREF(v);
    return r;
}

/* tensors_are(d, keys, specs) -> bool: for each i, ``d[keys[i]]`` is None where
 * ``specs[i]`` is None, else passes tensor_match with ``specs[i]`` (the arguments after the
 * tensor). False where a key is missing. One call for a module's parameters (or buffers). */
PyObject *tc_tensors_are(PyObject *, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 || !PyDict_Check(args[0]) || !PyTuple_Check(args[1]) ||
        !PyTuple_Check(args[2]) || PyTuple_GET_SIZE(args[1]) != PyTuple_GET_SIZE(args[2])) {
        PyErr_SetString(PyExc_TypeError, "tensors_are takes a dict and two tuples of one length");
        return nullptr;
    }
    if (getter_test == nullptr) {
        PyErr_SetString(PyExc_RuntimeError, "tensors_are: bind() was not called");
        return nullptr;
    }
    for (Py_ssize_t i = 0, n = PyTuple_GET_SIZE(args[1]); i < n; i++) {
        PyObject *t = PyDict_GetItemWithError(args[0], PyTuple_GET_ITEM(args[1], i)); /* borrowed */
        if (t == nullptr) {
            if (PyErr_Occurred())
                return nullptr;
            Py_RETURN_FALSE;
        }
        PyObject *spec = PyTuple_GET_ITEM(args[2], i);
        int r = spec == Py_None ? t == Py_None : spec_match(t, spec);
        if (r < 0)
            return nullptr;
        if (r == 0)
            Py_RETURN_FALSE;
    }
    Py_RETURN_TRUE;
}

PyObject *tc_bind(PyObject *, PyObject *fallback)
{
    if (!PyCallable_Check(fallback)) {
        PyErr_SetString(PyExc_TypeError, "bind takes the getter-based tensor_match");
        return nullptr;
    }
    Py_INCREF(fallback);
    Py_XSETREF(getter_test, fallback);
    Py_RETURN_NONE;
}

PyMethodDef tc_methods[] = {
    {"bind", tc_bind, METH_O,
     "bind(getter_tensor_match): the test for tensors this module does not read itself."},
    {"tensor_match", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(tc_tensor_match)),
     METH_FASTCALL,
     "tensor_match(t, cls, dtype, requires_grad, shape, stride, device, is_neg, is_conj) -> "
     "bool: _guard_checks.tensor_match's answer, read from the tensor's fields."},
    {"tensors_are", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(tc_tensors_are)),
     METH_FASTCALL,
     "tensors_are(d, keys, specs) -> bool: each d[keys[i]] is None (spec None) or passes "
     "tensor_match with specs[i], the arguments after the tensor."},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef tc_module = {PyModuleDef_HEAD_INIT, "danlu_dynamo._tensor_checks",
                         "The tensor metadata guard, read from the tensor.", -1, tc_methods};

} // namespace

PyMODINIT_FUNC PyInit__tensor_checks(void)
{
    PyObject *m = PyModule_Create(&tc_module);
    if (m != nullptr && PyModule_AddStringConstant(m, "TORCH_VERSION", DANLU_TORCH_VERSION) < 0) {
        Py_DECREF(m);
        return nullptr;
    }
    return m;
}
