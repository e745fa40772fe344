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
 * ``TENSOR_TEST`` (a capsule) hands the same test to ``_guard_checks.module_tree``, which runs
 * it over a module tree's parameters and buffers in one call.
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

/* The test on tensor_match's 9 arguments: 1 matches, 0 not, -1 error set. The type first,
 * then the fields, and the getters where the fields cannot be read plainly. Both
 * ``tensor_match`` and ``_guard_checks.module_tree`` (through the capsule TENSOR_TEST) run it. */
int args_match(PyObject *const *args)
{
    if (getter_test == nullptr) {
        PyErr_SetString(PyExc_RuntimeError, "tensor_match: bind() was not called");
        return -1;
    }
    if (reinterpret_cast<PyObject *>(Py_TYPE(args[0])) != args[1])
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

/* tensor_match(t, cls, dtype, requires_grad, shape, stride, device, is_neg, is_conj) -> bool,
 * with _guard_checks.tensor_match's arguments and answer. */
PyObject *tc_tensor_match(PyObject *, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 9) {
        PyErr_SetString(PyExc_TypeError, "tensor_match takes 9 arguments");
        return nullptr;
    }
    int r = args_match(args);
    return r < 0 ? nullptr : PyBool_FromLong(r);
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
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef tc_module = {PyModuleDef_HEAD_INIT, "danlu_dynamo._tensor_checks",
                         "The tensor metadata guard, read from the tensor.", -1, tc_methods};

} // namespace

PyMODINIT_FUNC PyInit__tensor_checks(void)
{
    PyObject *m = PyModule_Create(&tc_module);
    if (m == nullptr)
        return nullptr;
    PyObject *test = PyCapsule_New(reinterpret_cast<void *>(&args_match), "danlu_dynamo.tensor_test",
                                   nullptr);
    if (PyModule_AddStringConstant(m, "TORCH_VERSION", DANLU_TORCH_VERSION) < 0 ||
        test == nullptr || PyModule_AddObject(m, "TENSOR_TEST", test) < 0) {
        Py_XDECREF(test);
        Py_DECREF(m);
        return nullptr;
    }
    return m;
}
