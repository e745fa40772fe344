/* What danlu_inductor's C++ extensions (_replay_checks, _buffers) share: the tensor types they
 * read directly, and their module's creation with the torch version they were built against.
 * Each extension is a library of its own, so each has its own copy of ``plain_types``.
 */
#pragma once

#include <Python.h>

#ifndef DANLU_TORCH_VERSION
#define DANLU_TORCH_VERSION "unknown"
#endif

namespace {

/* The tuple of tensor types read directly (their Python methods are torch's own), set by the
 * module's bind(). */
PyObject *plain_types = nullptr;

bool plain_type(PyObject *t)
{
    PyObject *type = reinterpret_cast<PyObject *>(Py_TYPE(t));
    Py_ssize_t n = plain_types ? PyTuple_GET_SIZE(plain_types) : 0;
    for (Py_ssize_t i = 0; i < n; i++)
        if (PyTuple_GET_ITEM(plain_types, i) == type)
            return true;
    return false;
}

PyCFunction fastcall(PyObject *(*f)(PyObject *, PyObject *const *, Py_ssize_t))
{
    return reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(f));
}

/* The module, with ``TORCH_VERSION``: the version of the torch whose headers built it. */
PyObject *create_module(PyModuleDef *def)
{
    PyObject *m = PyModule_Create(def);
    if (m != nullptr && PyModule_AddStringConstant(m, "TORCH_VERSION", DANLU_TORCH_VERSION) < 0) {
        Py_DECREF(m);
        return nullptr;
    }
    return m;
}

} // namespace
