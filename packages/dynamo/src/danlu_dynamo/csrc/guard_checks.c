/* danlu_dynamo._guard_checks: the most frequent guard tests, in C.
 *
 * A compiled frame's guards run on every call. A model's are mostly two kinds: a tensor's
 * metadata (one per parameter and buffer: type, dtype, requires_grad, sizes, strides, device,
 * the negative and conjugate bits) and "this module has no hooks" (one per inlined module).
 * Written as Python expressions they cost about 450 and 200 ns; ResNet-50's 320 tensors and
 * 217 modules made about 200 of a check's 260 us (2-core development machine).
 *
 * The tensor test calls the tensor type's own attribute getters and methods directly (found
 * once, in ``bind``), which skips the attribute lookup; the getters themselves are most of
 * what is left. It is used only for tensor types whose attributes are those getters (the
 * Python side checks that when it builds a guard), so its answer is the expression's.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* The getters of torch's tensor base type, and its two methods, as bound by ``bind``. */
static struct {
    PyGetSetDef *dtype, *requires_grad, *shape, *is_cpu, *device;
    PyObject *stride, *is_neg, *is_conj; /* method descriptors (vectorcall) */
} T;

static PyObject *s_forward, *s_hook_keys[4];

static PyGetSetDef *
getset_of(PyObject *type_dict, const char *name)
{
    PyObject *d = PyDict_GetItemString(type_dict, name); /* borrowed */
    if (d == NULL || !PyObject_TypeCheck(d, &PyGetSetDescr_Type)) {
        PyErr_Format(PyExc_TypeError, "bind: %s is not an attribute getter", name);
        return NULL;
    }
    return ((PyGetSetDescrObject *)d)->d_getset;
}

static PyObject *
method_of(PyObject *type_dict, const char *name)
{
    PyObject *m = PyDict_GetItemString(type_dict, name); /* borrowed */
    if (m == NULL || !PyObject_TypeCheck(m, &PyMethodDescr_Type)) {
        PyErr_Format(PyExc_TypeError, "bind: %s is not a method", name);
        return NULL;
    }
    Py_INCREF(m);
    return m;
}

/* bind(tensor_base_type): find its getters and methods (the type that defines them). */
static PyObject *
gc_bind(PyObject *module, PyObject *type)
{
    (void)module;
    if (!PyType_Check(type)) {
        PyErr_SetString(PyExc_TypeError, "bind takes a type");
        return NULL;
    }
    PyObject *d = ((PyTypeObject *)type)->tp_dict;
    if (!(T.dtype = getset_of(d, "dtype")) || !(T.requires_grad = getset_of(d, "requires_grad")) ||
        !(T.shape = getset_of(d, "shape")) || !(T.is_cpu = getset_of(d, "is_cpu")) ||
        !(T.device = getset_of(d, "device")))
        return NULL;
    Py_XDECREF(T.stride);
    Py_XDECREF(T.is_neg);
    Py_XDECREF(T.is_conj);
    T.stride = T.is_neg = T.is_conj = NULL;
    if (!(T.stride = method_of(d, "stride")) || !(T.is_neg = method_of(d, "is_neg")) ||
        !(T.is_conj = method_of(d, "is_conj")))
        return NULL;
    Py_RETURN_NONE;
}

/* 1: the getter's value is ``expected`` (identity; ``eq``: equal), 0: not, -1: error. */
static int
get_matches(PyGetSetDef *g, PyObject *t, PyObject *expected, int eq)
{
    PyObject *v = g->get(t, g->closure);
    if (v == NULL)
        return -1;
    int r = eq ? PyObject_RichCompareBool(v, expected, Py_EQ) : v == expected;
    Py_DECREF(v);
    return r;
}

static int
call_matches(PyObject *method, PyObject *t, PyObject *expected, int eq)
{
    PyObject *v = PyObject_Vectorcall(method, &t, 1, NULL);
    if (v == NULL)
        return -1;
    int r = eq ? PyObject_RichCompareBool(v, expected, Py_EQ) : v == expected;
    Py_DECREF(v);
    return r;
}

/* tensor_match(t, cls, dtype, requires_grad, shape, stride, device, is_neg, is_conj) -> bool
 *
 * ``type(t) is cls and t.dtype is dtype and t.requires_grad is requires_grad and
 * t.shape == shape and t.stride() == stride``, then ``t.is_cpu`` where ``device`` is None,
 * else ``t.device == device``; then ``t.is_neg() is is_neg`` and, unless ``is_conj`` is
 * None, ``t.is_conj() is is_conj``. Raises what a getter raises. */
static PyObject *
gc_tensor_match(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 9) {
        PyErr_SetString(PyExc_TypeError, "tensor_match takes 9 arguments");
        return NULL;
    }
    if (T.stride == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "tensor_match: bind() was not called");
        return NULL;
    }
    PyObject *t = args[0];
    if ((PyObject *)Py_TYPE(t) != args[1])
        Py_RETURN_FALSE;
    int r = get_matches(T.dtype, t, args[2], 0);
    if (r > 0)
        r = get_matches(T.requires_grad, t, args[3], 0);
    if (r > 0)
        r = get_matches(T.shape, t, args[4], 1);
    if (r > 0)
        r = call_matches(T.stride, t, args[5], 1);
    if (r > 0)
        r = args[6] == Py_None ? get_matches(T.is_cpu, t, Py_True, 0)
                               : get_matches(T.device, t, args[6], 1);
    if (r > 0)
        r = call_matches(T.is_neg, t, args[7], 0);
    if (r > 0 && args[8] != Py_None)
        r = call_matches(T.is_conj, t, args[8], 0);
    if (r < 0)
        return NULL;
    return PyBool_FromLong(r);
}

/* hookless(d): a module's ``__dict__`` holds no hooks (its four hook dicts are empty). */
static int
hookless(PyObject *d)
{
    if (!PyDict_Check(d)) {
        PyErr_SetString(PyExc_TypeError, "hookless takes a module's __dict__");
        return -1;
    }
    for (int i = 0; i < 4; i++) {
        PyObject *hooks = PyDict_GetItemWithError(d, s_hook_keys[i]); /* borrowed */
        if (hooks == NULL) {
            if (!PyErr_Occurred())
                PyErr_SetObject(PyExc_KeyError, s_hook_keys[i]);
            return -1;
        }
        int full = PyObject_IsTrue(hooks);
        if (full != 0)
            return full < 0 ? -1 : 0;
    }
    return 1;
}

static PyObject *
gc_hookless(PyObject *module, PyObject *d)
{
    (void)module;
    int r = hookless(d);
    return r < 0 ? NULL : PyBool_FromLong(r);
}

/* plain(d): no hooks, and no ``forward`` of the instance's own; 1, 0, or -1 (error set). */
static int
plain(PyObject *d)
{
    int r = hookless(d);
    if (r > 0) {
        int own = PyDict_Contains(d, s_forward);
        r = own < 0 ? -1 : !own;
    }
    return r;
}

static PyObject *
gc_plain(PyObject *module, PyObject *d)
{
    (void)module;
    int r = plain(d);
    return r < 0 ? NULL : PyBool_FromLong(r);
}

/* The tensor test ``module_tree`` runs on a parameter or buffer: ``args`` is tensor_match's 9
 * arguments (the tensor, then its spec); 1: passes, 0: not, -1: error set. The getter-based
 * test here, or ``_tensor_checks``' field-reading one once ``use_tensor_test`` was given its
 * capsule. */
typedef int (*tensor_test_fn)(PyObject *const *args);

static int
getter_tensor_test(PyObject *const *args)
{
    PyObject *r = gc_tensor_match(NULL, args, 9);
    if (r == NULL)
        return -1;
    int ok = r == Py_True;
    Py_DECREF(r);
    return ok;
}

static tensor_test_fn tensor_test = getter_tensor_test;

/* ``tensor_test`` on ``t`` with ``spec``, tensor_match's 8 arguments after the tensor. */
static int
spec_holds(PyObject *t, PyObject *spec)
{
    if (!PyTuple_Check(spec) || PyTuple_GET_SIZE(spec) != 8) {
        PyErr_SetString(PyExc_TypeError, "module_tree: a tensor spec is 8 arguments");
        return -1;
    }
    PyObject *args[9] = {t};
    for (Py_ssize_t i = 0; i < 8; i++)
        args[i + 1] = PyTuple_GET_ITEM(spec, i);
    return tensor_test(args);
}


static PyObject *
gc_use_tensor_test(PyObject *module, PyObject *capsule)
{
    (void)module;
    if (capsule == Py_None) { /* back to the getter-based test */
        tensor_test = getter_tensor_test;
        Py_RETURN_NONE;
    }
    void *fn = PyCapsule_GetPointer(capsule, "danlu_dynamo.tensor_test");
    if (fn == NULL)
        return NULL;
    tensor_test = (tensor_test_fn)fn;
    Py_RETURN_NONE;
}

static PyObject *s_modules_key, *s_getattr_key, *s_store_keys[3];

/* 1: ``obj`` (of type ``cls``, instance dict ``d``) has no attribute ``name`` where its
 * ``__getattr__`` is ``getattr_fn``, nn.Module's, which finds only ``_parameters``,
 * ``_buffers`` and ``_modules`` entries; 0: it may have one; -1: error set. */
static int
module_lacks(PyTypeObject *cls, PyObject *d, PyObject *name)
{
    if (_PyType_Lookup(cls, name) != NULL)
        return 0;
    int in = PyDict_Contains(d, name);
    for (int i = 0; in == 0 && i < 3; i++) {
        PyObject *store = PyDict_GetItemWithError(d, s_store_keys[i]); /* borrowed */
        if (store == NULL)
            in = PyErr_Occurred() ? -1 : 0;
        else
            in = PyDict_Check(store) ? PyDict_Contains(store, name) : 1;
    }
    return in < 0 ? -1 : !in;
}

/* ``d[key]`` (borrowed), NULL with no error where it is missing or ``d`` is no dict. */
static PyObject *
item_of(PyObject *d, PyObject *key)
{
    if (!PyDict_Check(d))
        return NULL;
    return PyDict_GetItemWithError(d, key);
}

/* One node of ``module_tree``'s spec, tested on ``obj``: 1 all hold, 0 not, -1 error set.
 * node = (cls, keys, values, hooks, stores, children, absent, getattr_fn);
 * stores = ((store, keys, specs), ...); children = ((key, child, node), ...) under
 * ``obj.__dict__['_modules']``; absent: names ``obj`` has no attribute of, given that its
 * type's ``__getattr__`` is ``getattr_fn`` (nn.Module's). */
static int
tree_holds(PyObject *obj, PyObject *node)
{
    if (!PyTuple_Check(node) || PyTuple_GET_SIZE(node) != 8) {
        PyErr_SetString(PyExc_TypeError, "module_tree: a node is 8 items");
        return -1;
    }
    PyObject *cls = PyTuple_GET_ITEM(node, 0), *keys = PyTuple_GET_ITEM(node, 1),
             *values = PyTuple_GET_ITEM(node, 2), *stores = PyTuple_GET_ITEM(node, 4),
             *children = PyTuple_GET_ITEM(node, 5), *absent = PyTuple_GET_ITEM(node, 6);
    long hooks = PyLong_AsLong(PyTuple_GET_ITEM(node, 3));
    if (hooks == -1 && PyErr_Occurred())
        return -1;
    if ((PyObject *)Py_TYPE(obj) != cls)
        return 0;
    PyObject *d = PyObject_GenericGetDict(obj, NULL);
    if (d == NULL)
        return -1;
    int ok = PyDict_Check(d);
    for (Py_ssize_t i = 0, n = PyTuple_GET_SIZE(keys); ok > 0 && i < n; i++) {
        PyObject *v = PyDict_GetItemWithError(d, PyTuple_GET_ITEM(keys, i));
        ok = v != NULL ? v == PyTuple_GET_ITEM(values, i) : (PyErr_Occurred() ? -1 : 0);
    }
    if (ok > 0 && hooks > 0)
        ok = hooks == 2 ? plain(d) : hookless(d);
    for (Py_ssize_t i = 0, n = PyTuple_GET_SIZE(stores); ok > 0 && i < n; i++) {
        PyObject *store = PyTuple_GET_ITEM(stores, i);
        PyObject *sd = item_of(d, PyTuple_GET_ITEM(store, 0));
        PyObject *skeys = PyTuple_GET_ITEM(store, 1), *specs = PyTuple_GET_ITEM(store, 2);
        if (sd == NULL) {
            ok = PyErr_Occurred() ? -1 : 0;
            break;
        }
        for (Py_ssize_t j = 0, m = PyTuple_GET_SIZE(skeys); ok > 0 && j < m; j++) {
            PyObject *t = item_of(sd, PyTuple_GET_ITEM(skeys, j));
            PyObject *spec = PyTuple_GET_ITEM(specs, j);
            if (t == NULL)
                ok = PyErr_Occurred() ? -1 : 0;
            else
                ok = spec == Py_None ? t == Py_None : spec_holds(t, spec);
        }
    }
    if (ok > 0 && PyTuple_GET_SIZE(absent) > 0) {
        PyObject *fn = _PyType_Lookup((PyTypeObject *)cls, s_getattr_key); /* borrowed */
        ok = fn != NULL && fn == PyTuple_GET_ITEM(node, 7);
        for (Py_ssize_t i = 0, n = PyTuple_GET_SIZE(absent); ok > 0 && i < n; i++)
            ok = module_lacks((PyTypeObject *)cls, d, PyTuple_GET_ITEM(absent, i));
    }
    if (ok > 0 && PyTuple_GET_SIZE(children) > 0) {
        PyObject *md = item_of(d, s_modules_key);
        if (md == NULL)
            ok = PyErr_Occurred() ? -1 : 0;
        for (Py_ssize_t i = 0, n = PyTuple_GET_SIZE(children); ok > 0 && i < n; i++) {
            PyObject *child = PyTuple_GET_ITEM(children, i);
            PyObject *c = item_of(md, PyTuple_GET_ITEM(child, 0));
            if (c == NULL)
                ok = PyErr_Occurred() ? -1 : 0;
            else if (c != PyTuple_GET_ITEM(child, 1))
                ok = 0;
            else
                ok = tree_holds(c, PyTuple_GET_ITEM(child, 2));
        }
    }
    Py_DECREF(d);
    return ok;
}

/* module_tree(obj, node) -> bool: every test of the spec holds on ``obj`` and, through
 * ``_modules``, on the submodules it names (the very objects seen at capture). */
static PyObject *
gc_module_tree(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "module_tree takes an object and a node");
        return NULL;
    }
    if (Py_EnterRecursiveCall(" in module_tree"))
        return NULL;
    int ok = tree_holds(args[0], args[1]);
    Py_LeaveRecursiveCall();
    return ok < 0 ? NULL : PyBool_FromLong(ok);
}

static PyMethodDef gc_methods[] = {
    {"bind", gc_bind, METH_O,
     "bind(tensor_base_type): use its attribute getters and methods in tensor_match."},
    {"tensor_match", (PyCFunction)(void (*)(void))gc_tensor_match, METH_FASTCALL,
     "tensor_match(t, cls, dtype, requires_grad, shape, stride, device, is_neg, is_conj)"
     " -> bool: a tensor's guarded metadata (device None: on the CPU; is_conj None: not"
     " tested)."},
    {"hookless", gc_hookless, METH_O, "hookless(module.__dict__) -> bool: no hooks on it."},
    {"plain", gc_plain, METH_O,
     "plain(module.__dict__) -> bool: no hooks, no forward assigned on the instance."},
    {"module_tree", (PyCFunction)(void (*)(void))gc_module_tree, METH_FASTCALL,
     "module_tree(obj, node) -> bool: the node's tests hold on obj and its submodules"
     " (node = (cls, keys, values, hooks, stores, children, absent, getattr_fn))."},
    {"use_tensor_test", gc_use_tensor_test, METH_O,
     "use_tensor_test(capsule): module_tree tests tensors with the capsule's function"
     " (None: the getter-based test)."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef gc_module = {PyModuleDef_HEAD_INIT, "danlu_dynamo._guard_checks",
                                       "Frequent guard tests, in C.", -1, gc_methods};

PyMODINIT_FUNC
PyInit__guard_checks(void)
{
    static const char *hook_keys[4] = {"_forward_hooks", "_forward_pre_hooks",
                                       "_backward_hooks", "_backward_pre_hooks"};
    if (s_forward == NULL) {
        s_forward = PyUnicode_InternFromString("forward");
        s_modules_key = PyUnicode_InternFromString("_modules");
        s_getattr_key = PyUnicode_InternFromString("__getattr__");
        s_store_keys[0] = PyUnicode_InternFromString("_parameters");
        s_store_keys[1] = PyUnicode_InternFromString("_buffers");
        s_store_keys[2] = s_modules_key;
        if (s_forward == NULL || s_modules_key == NULL || s_getattr_key == NULL ||
            s_store_keys[0] == NULL || s_store_keys[1] == NULL)
            return NULL;
        for (int i = 0; i < 4; i++) {
            s_hook_keys[i] = PyUnicode_InternFromString(hook_keys[i]);
            if (s_hook_keys[i] == NULL)
                return NULL;
        }
    }
    return PyModule_Create(&gc_module);
}
