/* danlu_dynamo._eval_frame: the PEP 523 frame hook and the per-code cache.
 *
 * While a thread runs a compiled region, every Python function frame it starts comes here
 * before it runs. Frames we cannot or must not touch go straight to the previous evaluator.
 * For the others we look up the cache kept in the code object's extra slot: a list of
 * (check_fn, transformed code, GuardedCode), most recent hit first. A hit runs the transformed
 * code (as a function built from it and the original closure, called with the frame's
 * arguments); a miss asks the thread's Python callback for a new GuardedCode.
 *
 * The Python side (eval_frame.py) documents the contract; this file only enforces it.
 * Tested on CPython 3.11, 3.12 and 3.13: the frame layout and who disposes of a frame
 * differ between them (see dispose_unrun_frame).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h> /* T_OBJECT, READONLY (3.11) */

#if PY_VERSION_HEX < 0x030B0000 || PY_VERSION_HEX >= 0x030E0000
#error "danlu_dynamo._eval_frame is tested on CPython 3.11, 3.12 and 3.13 only: check the _PyInterpreterFrame layout and the frame disposal rule before adding a version"
#endif

#ifdef Py_GIL_DISABLED
#error "danlu_dynamo._eval_frame relies on the GIL to keep its cache consistent: free-threaded builds are not supported"
#endif

#define Py_BUILD_CORE 1
#include "internal/pycore_frame.h" /* _PyInterpreterFrame, frame owners */
#include "internal/pycore_code.h"  /* _PyLocals_GetKind, CO_FAST_* */
#undef Py_BUILD_CORE

#define PY312_PLUS (PY_VERSION_HEX >= 0x030C0000)
#define PY313_PLUS (PY_VERSION_HEX >= 0x030D0000)

#if defined(_MSC_VER)
#define THREAD_LOCAL __declspec(thread)
#else
#define THREAD_LOCAL _Thread_local
#endif

/* ---- version shims over _PyInterpreterFrame ------------------------------------------- */
#if PY313_PLUS
#define FRAME_CODE_OBJ(f) ((f)->f_executable)
#define FRAME_FUNC_OBJ(f) ((f)->f_funcobj)
#define FRAME_AT_ENTRY(f, co) ((f)->instr_ptr == _PyCode_CODE(co))
/* Exported since 3.13 (declared in internal/pycore_ceval.h, which we do not include). */
PyAPI_FUNC(void) _PyEval_FrameClearAndPop(PyThreadState *, _PyInterpreterFrame *);
#elif PY312_PLUS
#define FRAME_CODE_OBJ(f) ((PyObject *)(f)->f_code)
#define FRAME_FUNC_OBJ(f) ((f)->f_funcobj)
#define FRAME_AT_ENTRY(f, co) ((f)->prev_instr == _PyCode_CODE(co) - 1)
#else /* 3.11 */
#define FRAME_CODE_OBJ(f) ((PyObject *)(f)->f_code)
#define FRAME_FUNC_OBJ(f) ((PyObject *)(f)->f_func)
#define FRAME_AT_ENTRY(f, co) ((f)->prev_instr == _PyCode_CODE(co) - 1)
#endif

#if PY312_PLUS /* the underscore names became deprecated aliases in 3.12 */
#define CODE_GET_EXTRA PyUnstable_Code_GetExtra
#define CODE_SET_EXTRA PyUnstable_Code_SetExtra
#define REQUEST_CODE_EXTRA_INDEX PyUnstable_Eval_RequestCodeExtraIndex
#else
#define CODE_GET_EXTRA _PyCode_GetExtra
#define CODE_SET_EXTRA _PyCode_SetExtra
#define REQUEST_CODE_EXTRA_INDEX _PyEval_RequestCodeExtraIndex
#endif

#define NOT_A_PLAIN_FUNCTION \
    (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR | CO_ITERABLE_COROUTINE)

/* ---- global and per-thread state --------------------------------------------------------
 * The eval function is per interpreter; the callback is per thread. The hook is installed
 * while at least one thread has a callback set, and the evaluator found at that moment is
 * restored when the last one clears it (the hook costs every Python call, see README). */
static Py_ssize_t g_extra_index = -1;
static _PyFrameEvalFunction g_prev_eval = NULL; /* the evaluator we chain to */
static Py_ssize_t g_active_threads = 0;
static Py_ssize_t g_cache_limit = 8;
static PyObject *g_validate = NULL;       /* eval_frame._validate(code, result) -> tuple */
static PyObject *g_on_cache_limit = NULL; /* eval_frame._on_cache_limit(code, locals, list) */
static PyObject *g_frame_type = NULL;

/* NULL: off; Py_False: run-only; a callable: compile on a miss. Strong reference. */
static THREAD_LOCAL PyObject *t_callback = NULL;
/* > 0 while this thread runs guards or the callback: frames started then run unhooked. */
static THREAD_LOCAL int t_suspended = 0;

static unsigned long long n_frames, n_hits, n_misses, n_compiles, n_eager, n_chunks_freed;

/* ---- per-code extra state ------------------------------------------------------------ */
typedef struct ExtraState {
    PyObject *entries; /* list of (check_fn, code, guarded), most recent hit first; or NULL */
    char skip_user;    /* mark_skip(): never look at this code */
    char skip_inner;   /* transformed code we made: run it as is */
    char stopped;      /* recompile limit reached: misses run eagerly */
    struct ExtraState *prev, *next; /* registry, for reset() */
} ExtraState;

static ExtraState g_registry = {NULL, 0, 0, 0, &g_registry, &g_registry};

static void
free_extra_state(void *p)
{
    ExtraState *st = (ExtraState *)p;
    if (st == NULL)
        return;
    st->prev->next = st->next;
    st->next->prev = st->prev;
    PyObject *entries = st->entries;
    PyMem_RawFree(st);
    Py_XDECREF(entries);
}

static ExtraState *
get_extra_state(PyObject *code)
{
    void *p = NULL;
    if (CODE_GET_EXTRA(code, g_extra_index, &p) < 0) {
        PyErr_Clear();
        return NULL;
    }
    return (ExtraState *)p;
}

static ExtraState *
ensure_extra_state(PyObject *code)
{
    ExtraState *st = get_extra_state(code);
    if (st != NULL)
        return st;
    st = (ExtraState *)PyMem_RawCalloc(1, sizeof(ExtraState));
    if (st == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    if (CODE_SET_EXTRA(code, g_extra_index, st) < 0) {
        PyMem_RawFree(st);
        return NULL;
    }
    st->next = g_registry.next;
    st->prev = &g_registry;
    g_registry.next->prev = st;
    g_registry.next = st;
    return st;
}

/* ---- frame disposal ---------------------------------------------------------------------
 * When we answer a frame ourselves (or fail), the frame that CPython pushed for the call must
 * be disposed of exactly once. 3.11: _PyEval_Vector clears and pops it after we return, so we
 * must not. 3.12+: the evaluator owns it; the default one clears and pops every frame it runs,
 * so we must do it too. 3.13 exports the helper; on 3.12 the helpers are not exported and we
 * do the same work for the only case that reaches here: a thread-owned frame that has not
 * started and has no frame object (checked before we answer). */
#if PY312_PLUS && !PY313_PLUS
static void
pop_unrun_frame_312(PyThreadState *ts, _PyInterpreterFrame *f)
{
    /* clear: the slots hold the arguments (strong); f_locals is NULL for function frames */
    for (int i = 0; i < f->stacktop; i++)
        Py_CLEAR(f->localsplus[i]);
    f->stacktop = 0;
    Py_CLEAR(f->f_locals);
    Py_DECREF(f->f_funcobj);
    Py_DECREF(f->f_code);
    /* pop: the frame is the top of the data stack; drop its chunk if it started one */
    PyObject **base = (PyObject **)f;
    _PyStackChunk *chunk = ts->datastack_chunk;
    if (base == &chunk->data[0]) {
        _PyStackChunk *previous = chunk->previous;
        ts->datastack_top = &previous->data[previous->top];
        ts->datastack_chunk = previous;
        ts->datastack_limit = (PyObject **)((char *)previous + previous->size);
        PyObjectArenaAllocator arena;
        PyObject_GetArenaAllocator(&arena);
        arena.free(arena.ctx, chunk, chunk->size);
        n_chunks_freed++;
    }
    else {
        ts->datastack_top = base;
    }
}
#endif

static void
dispose_unrun_frame(PyThreadState *ts, _PyInterpreterFrame *f)
{
#if PY313_PLUS
    _PyEval_FrameClearAndPop(ts, f);
#elif PY312_PLUS
    pop_unrun_frame_312(ts, f);
#else
    (void)ts;
    (void)f; /* 3.11: the caller (_PyEval_Vector) clears and pops it */
#endif
}

static inline PyObject *
eval_previous(PyThreadState *ts, _PyInterpreterFrame *f, int throwflag)
{
    _PyFrameEvalFunction prev = g_prev_eval;
    if (prev != NULL && prev != _PyEval_EvalFrameDefault)
        return prev(ts, f, throwflag);
    return _PyEval_EvalFrameDefault(ts, f, throwflag);
}

/* ---- reading a frame at entry ---------------------------------------------------------- */
static inline int
total_args(PyCodeObject *co)
{
    return co->co_argcount + co->co_kwonlyargcount + ((co->co_flags & CO_VARARGS) != 0) +
           ((co->co_flags & CO_VARKEYWORDS) != 0);
}

/* Arguments (from their slots) and free variables (cell contents, from the closure: the
 * free-var slots are still empty at entry). Never mutates the frame. */
static PyObject *
entry_locals(_PyInterpreterFrame *f, PyCodeObject *co, PyObject *closure)
{
    PyObject *d = PyDict_New();
    if (d == NULL)
        return NULL;
    PyObject *names = co->co_localsplusnames;
    int nargs = total_args(co);
    for (int i = 0; i < nargs; i++) {
        PyObject *v = f->localsplus[i];
        if (v != NULL && PyDict_SetItem(d, PyTuple_GET_ITEM(names, i), v) < 0)
            goto fail;
    }
    int n = co->co_nlocalsplus;
    int first_free = n - co->co_nfreevars;
    if (closure != NULL && closure != Py_None) {
        for (int i = first_free; i < n; i++) {
            PyObject *v = PyCell_GET(PyTuple_GET_ITEM(closure, i - first_free));
            if (v != NULL && PyDict_SetItem(d, PyTuple_GET_ITEM(names, i), v) < 0)
                goto fail;
        }
    }
    return d;
fail:
    Py_DECREF(d);
    return NULL;
}

/* Call fn with the frame's bound arguments: positionals and *args positionally, keyword-only
 * arguments and **kwargs by keyword. Defaults are already applied in the frame. */
static PyObject *
call_with_frame_args(PyObject *fn, _PyInterpreterFrame *f, PyCodeObject *co)
{
    PyObject **lp = f->localsplus;
    int argc = co->co_argcount, kwonly = co->co_kwonlyargcount;
    int has_va = (co->co_flags & CO_VARARGS) != 0;
    PyObject *va = has_va ? lp[argc + kwonly] : NULL;
    PyObject *vk = (co->co_flags & CO_VARKEYWORDS) ? lp[argc + kwonly + has_va] : NULL;
    Py_ssize_t nva = va ? PyTuple_GET_SIZE(va) : 0;
    Py_ssize_t nvk = vk ? PyDict_GET_SIZE(vk) : 0;

    if (nva == 0 && kwonly == 0 && nvk == 0) /* the common case: no re-packing */
        return PyObject_Vectorcall(fn, lp, argc, NULL);

    Py_ssize_t npos = argc + nva, nkw = kwonly + nvk;
    PyObject *small[16];
    PyObject **stack = small;
    if (npos + nkw > 16) {
        stack = PyMem_Malloc((npos + nkw) * sizeof(PyObject *));
        if (stack == NULL)
            return PyErr_NoMemory();
    }
    PyObject *kwnames = NULL, *res = NULL;
    for (int i = 0; i < argc; i++)
        stack[i] = lp[i];
    for (Py_ssize_t j = 0; j < nva; j++)
        stack[argc + j] = PyTuple_GET_ITEM(va, j);
    if (nkw) {
        kwnames = PyTuple_New(nkw);
        if (kwnames == NULL)
            goto done;
        for (int j = 0; j < kwonly; j++) {
            PyTuple_SET_ITEM(kwnames, j,
                             Py_NewRef(PyTuple_GET_ITEM(co->co_localsplusnames, argc + j)));
            stack[npos + j] = lp[argc + j];
        }
        Py_ssize_t pos = 0, k = kwonly;
        PyObject *key, *value;
        while (vk && PyDict_Next(vk, &pos, &key, &value)) {
            PyTuple_SET_ITEM(kwnames, k, Py_NewRef(key));
            stack[npos + k] = value;
            k++;
        }
    }
    res = PyObject_Vectorcall(fn, stack, npos, kwnames);
done:
    Py_XDECREF(kwnames);
    if (stack != small)
        PyMem_Free(stack);
    return res;
}

/* A function running `code` with the original function's globals, name and closure.
 * Built per call for closures: caching one would keep the closure's cells (captured tensors)
 * alive through the code object's extra slot, which the garbage collector cannot see. A
 * closure-free function whose globals are a module's dict gets one cached in its cache entry
 * instead: it holds only that dict, which lives as long as the module anyway. */
static PyObject *
function_for(PyObject *code, PyFunctionObject *orig)
{
    PyObject *fn = PyFunction_NewWithQualName(code, orig->func_globals, orig->func_qualname);
    if (fn == NULL)
        return NULL;
    if (orig->func_closure != NULL && PyFunction_SetClosure(fn, orig->func_closure) < 0) {
        Py_DECREF(fn);
        return NULL;
    }
    return fn;
}

/* ---- the frame object shown to the callback --------------------------------------------- */
typedef struct {
    PyObject_HEAD
    PyObject *f_code, *f_locals, *f_globals, *f_builtins, *closure;
} FrameInfo;

static void
FrameInfo_dealloc(FrameInfo *self)
{
    Py_XDECREF(self->f_code);
    Py_XDECREF(self->f_locals);
    Py_XDECREF(self->f_globals);
    Py_XDECREF(self->f_builtins);
    Py_XDECREF(self->closure);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
FrameInfo_repr(FrameInfo *self)
{
    PyCodeObject *co = (PyCodeObject *)self->f_code;
    return PyUnicode_FromFormat("<frame at entry of %U (%U:%d)>", co->co_qualname,
                                co->co_filename, co->co_firstlineno);
}

static PyMemberDef FrameInfo_members[] = {
    {"f_code", T_OBJECT, offsetof(FrameInfo, f_code), READONLY, "the frame's code object"},
    {"f_locals", T_OBJECT, offsetof(FrameInfo, f_locals), READONLY,
     "arguments and free variables at entry (a fresh dict)"},
    {"f_globals", T_OBJECT, offsetof(FrameInfo, f_globals), READONLY, "the function's globals"},
    {"f_builtins", T_OBJECT, offsetof(FrameInfo, f_builtins), READONLY, "the frame's builtins"},
    {"closure", T_OBJECT, offsetof(FrameInfo, closure), READONLY,
     "the function's closure (tuple of cells) or None"},
    {NULL}};

static PyType_Slot FrameInfo_slots[] = {
    {Py_tp_dealloc, FrameInfo_dealloc},
    {Py_tp_repr, FrameInfo_repr},
    {Py_tp_members, FrameInfo_members},
    {Py_tp_doc, "A Python function frame at entry, as the frame hook's callback sees it."},
    {0, NULL}};

static PyType_Spec FrameInfo_spec = {"danlu_dynamo._eval_frame.FrameInfo", sizeof(FrameInfo), 0,
                                     Py_TPFLAGS_DEFAULT, FrameInfo_slots};

static PyObject *
make_frame_info(_PyInterpreterFrame *f, PyObject *code, PyObject *locals, PyObject *closure)
{
    FrameInfo *fi = PyObject_New(FrameInfo, (PyTypeObject *)g_frame_type);
    if (fi == NULL)
        return NULL;
    fi->f_code = Py_NewRef(code);
    fi->f_locals = Py_NewRef(locals);
    fi->f_globals = Py_NewRef(f->f_globals);
    fi->f_builtins = Py_NewRef(f->f_builtins);
    fi->closure = Py_NewRef(closure ? closure : Py_None);
    return (PyObject *)fi;
}

/* ---- the hook ------------------------------------------------------------------------- */

/* Index of the first entry whose check_fn accepts `locals` (and a new reference to it in
 * *hit), -1 on a miss, -2 on error. Guards run Python code that may change the list (other
 * threads, reset()), so each step re-reads it and holds its own references. */
static Py_ssize_t
lookup(PyObject *entries, PyObject *locals, PyObject **hit)
{
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(entries); i++) {
        PyObject *entry = Py_NewRef(PyList_GET_ITEM(entries, i));
        PyObject *r = PyObject_CallOneArg(PyTuple_GET_ITEM(entry, 0), locals);
        int ok = r == NULL ? -1 : PyObject_IsTrue(r);
        Py_XDECREF(r);
        if (ok < 0) {
            Py_DECREF(entry);
            return -2;
        }
        if (ok) {
            *hit = entry;
            return i;
        }
        Py_DECREF(entry);
    }
    return -1;
}

/* Move entry at index i to the front (no Python code runs: atomic under the GIL). */
static void
move_to_front(PyObject *entries, Py_ssize_t i, PyObject *entry)
{
    PyListObject *l = (PyListObject *)entries;
    if (i <= 0 || i >= Py_SIZE(l) || l->ob_item[i] != entry)
        return;
    memmove(&l->ob_item[1], &l->ob_item[0], i * sizeof(PyObject *));
    l->ob_item[0] = entry;
}

/* The callback's answer -> a new cache entry at the front; returns a new reference to the
 * entry, Py_None when the callback declined, NULL on error. */
static PyObject *
compile_frame(PyObject *cb, _PyInterpreterFrame *f, PyObject *code, PyFunctionObject *func,
              PyObject *locals, ExtraState **pst)
{
    Py_ssize_t cache_size = (*pst && (*pst)->entries) ? PyList_GET_SIZE((*pst)->entries) : 0;
    PyObject *frame = make_frame_info(f, code, locals, func->func_closure);
    if (frame == NULL)
        return NULL;
    PyObject *size = PyLong_FromSsize_t(cache_size);
    if (size == NULL) {
        Py_DECREF(frame);
        return NULL;
    }
    n_compiles++;
    PyObject *res = PyObject_CallFunctionObjArgs(cb, frame, size, NULL);
    Py_DECREF(frame);
    Py_DECREF(size);
    if (res == NULL || res == Py_None)
        return res;
    /* _validate checks the contract and returns (check_fn, code, guarded, reusable): reusable
     * when the function's globals are a module's, so one function object for the transformed
     * code may serve every call of a closure-free function (see function_for) */
    PyObject *checked =
        PyObject_CallFunctionObjArgs(g_validate, code, res, func->func_globals, NULL);
    Py_DECREF(res);
    if (checked == NULL)
        return NULL;
    if (!PyTuple_Check(checked) || PyTuple_GET_SIZE(checked) != 4 ||
        !PyCode_Check(PyTuple_GET_ITEM(checked, 1))) {
        Py_DECREF(checked);
        PyErr_SetString(PyExc_SystemError, "danlu_dynamo: _validate returned a bad entry");
        return NULL;
    }
    PyObject *tcode = PyTuple_GET_ITEM(checked, 1);
    PyObject *reusable = Py_NewRef(Py_None);
    if (PyTuple_GET_ITEM(checked, 3) == Py_True && tcode != code && func->func_closure == NULL) {
        Py_SETREF(reusable, function_for(tcode, func));
        if (reusable == NULL) {
            Py_DECREF(checked);
            return NULL;
        }
    }
    PyObject *entry = PyTuple_Pack(4, PyTuple_GET_ITEM(checked, 0), tcode,
                                   PyTuple_GET_ITEM(checked, 2), reusable);
    Py_DECREF(checked);
    Py_DECREF(reusable);
    if (entry == NULL)
        return NULL;
    ExtraState *st = ensure_extra_state(code); /* the callback may have reset() the cache */
    if (st == NULL)
        goto fail;
    if (tcode != code) {
        ExtraState *inner = ensure_extra_state(tcode);
        if (inner == NULL)
            goto fail;
        inner->skip_inner = 1;
    }
    if (st->entries == NULL && (st->entries = PyList_New(0)) == NULL)
        goto fail;
    /* another thread may have filled the cache while the callback ran: then this entry
     * serves this call only, so the limit holds exactly */
    if (PyList_GET_SIZE(st->entries) < g_cache_limit && PyList_Insert(st->entries, 0, entry) < 0)
        goto fail;
    *pst = st;
    return entry;
fail:
    Py_DECREF(entry);
    return NULL;
}

static PyObject *
danlu_eval_frame(PyThreadState *ts, _PyInterpreterFrame *f, int throwflag)
{
    PyObject *cb = t_callback;
    if (cb == NULL || t_suspended || throwflag || ts->tracing ||
        f->owner != FRAME_OWNED_BY_THREAD)
        return eval_previous(ts, f, throwflag);
    PyObject *code = FRAME_CODE_OBJ(f);
    PyObject *func = FRAME_FUNC_OBJ(f);
    if (!PyCode_Check(code) || func == NULL || !PyFunction_Check(func))
        return eval_previous(ts, f, throwflag);
    PyCodeObject *co = (PyCodeObject *)code;
    /* f_locals is set only for exec'd code, even when it is a function's code object */
    if ((co->co_flags & NOT_A_PLAIN_FUNCTION) || !(co->co_flags & CO_OPTIMIZED) ||
        f->f_locals != NULL || !FRAME_AT_ENTRY(f, co))
        return eval_previous(ts, f, throwflag);
#if PY312_PLUS && !PY313_PLUS
    if (f->frame_obj != NULL) /* never seen at entry; our 3.12 clear does not handle it */
        return eval_previous(ts, f, throwflag);
#endif
    ExtraState *st = get_extra_state(code);
    if (st != NULL && (st->skip_user || st->skip_inner))
        return eval_previous(ts, f, throwflag);
    int run_only = cb == Py_False;
    int have_entries = st != NULL && st->entries != NULL && PyList_GET_SIZE(st->entries) > 0;
    if (!have_entries && (run_only || (st != NULL && st->stopped)))
        return eval_previous(ts, f, throwflag);

    n_frames++;
    Py_INCREF(cb);
    t_suspended++;
    PyObject *closure = ((PyFunctionObject *)func)->func_closure;
    PyObject *entry = NULL, *result = NULL;
    PyObject *locals = entry_locals(f, co, closure);
    if (locals == NULL)
        goto error;

    if (have_entries) {
        PyObject *entries = Py_NewRef(st->entries);
        Py_ssize_t i = lookup(entries, locals, &entry);
        if (i >= 0)
            move_to_front(entries, i, entry);
        Py_DECREF(entries);
        if (i == -2)
            goto error;
        st = get_extra_state(code); /* guards ran Python code */
    }
    if (entry != NULL) {
        n_hits++;
    }
    else {
        n_misses++;
        Py_ssize_t cache_size = (st && st->entries) ? PyList_GET_SIZE(st->entries) : 0;
        if (run_only || (st != NULL && st->stopped))
            goto run_original;
        if (cache_size >= g_cache_limit) {
            st->stopped = 1;
            n_eager++;
            PyObject *r = PyObject_CallFunctionObjArgs(g_on_cache_limit, code, locals,
                                                       st->entries, NULL);
            if (r == NULL)
                goto error;
            Py_DECREF(r);
            goto run_original;
        }
        entry = compile_frame(cb, f, code, (PyFunctionObject *)func, locals, &st);
        if (entry == NULL)
            goto error;
        if (entry == Py_None) {
            Py_CLEAR(entry);
            goto run_original;
        }
    }

    /* hit (or fresh compile): run the transformed code with the frame's arguments */
    Py_CLEAR(locals);
    t_suspended--;
    Py_DECREF(cb);
    PyObject *tcode = PyTuple_GET_ITEM(entry, 1);
    if (tcode == code) { /* the callback chose the original code: run this very frame */
        Py_DECREF(entry);
        return eval_previous(ts, f, throwflag);
    }
    PyObject *fn = PyTuple_GET_ITEM(entry, 3);
    if (fn != Py_None && ((PyFunctionObject *)func)->func_closure == NULL &&
        ((PyFunctionObject *)fn)->func_globals == ((PyFunctionObject *)func)->func_globals)
        Py_INCREF(fn);
    else
        fn = function_for(tcode, (PyFunctionObject *)func);
    Py_DECREF(entry);
    if (fn != NULL) {
        result = call_with_frame_args(fn, f, co);
        Py_DECREF(fn);
    }
    dispose_unrun_frame(ts, f);
    return result;

run_original:
    Py_XDECREF(locals);
    t_suspended--;
    Py_DECREF(cb);
    return eval_previous(ts, f, throwflag);

error:
    Py_XDECREF(locals);
    Py_XDECREF(entry);
    t_suspended--;
    Py_DECREF(cb);
    dispose_unrun_frame(ts, f);
    return NULL;
}

/* ---- installing the hook -------------------------------------------------------------- */
static void
hook_acquire(void)
{
    if (g_active_threads++ > 0)
        return;
    PyInterpreterState *interp = PyInterpreterState_Get();
    _PyFrameEvalFunction cur = _PyInterpreterState_GetEvalFrameFunc(interp);
    if (cur != danlu_eval_frame) {
        g_prev_eval = cur;
        _PyInterpreterState_SetEvalFrameFunc(interp, danlu_eval_frame);
    }
}

static void
hook_release(void)
{
    if (--g_active_threads > 0)
        return;
    PyInterpreterState *interp = PyInterpreterState_Get();
    /* leave alone an evaluator someone installed over ours */
    if (_PyInterpreterState_GetEvalFrameFunc(interp) == danlu_eval_frame)
        _PyInterpreterState_SetEvalFrameFunc(
            interp, g_prev_eval ? g_prev_eval : _PyEval_EvalFrameDefault);
}

/* ---- Python API ----------------------------------------------------------------------- */
static PyObject *
ef_set_eval_frame(PyObject *m, PyObject *cb)
{
    if (g_validate == NULL) {
        PyErr_SetString(PyExc_RuntimeError,
                        "use danlu_dynamo.eval_frame, which installs the cache helpers");
        return NULL;
    }
    if (cb != Py_None && cb != Py_False && !PyCallable_Check(cb)) {
        PyErr_SetString(PyExc_TypeError,
                        "set_eval_frame expects None (off), False (run-only) or a callable");
        return NULL;
    }
    PyObject *prev = t_callback; /* ownership moves to the caller */
    PyObject *next = cb == Py_None ? NULL : Py_NewRef(cb);
    t_callback = next;
    if (prev == NULL && next != NULL)
        hook_acquire();
    else if (prev != NULL && next == NULL)
        hook_release();
    return prev ? prev : Py_NewRef(Py_None);
}

static PyObject *
ef_get_eval_frame(PyObject *m, PyObject *noargs)
{
    return Py_NewRef(t_callback ? t_callback : Py_None);
}

static int
check_code(PyObject *code)
{
    if (!PyCode_Check(code)) {
        PyErr_Format(PyExc_TypeError, "expected a code object, got %.100s",
                     Py_TYPE(code)->tp_name);
        return -1;
    }
    return 0;
}

static PyObject *
ef_mark_skip(PyObject *m, PyObject *code)
{
    if (check_code(code) < 0)
        return NULL;
    ExtraState *st = ensure_extra_state(code);
    if (st == NULL)
        return NULL;
    st->skip_user = 1;
    Py_RETURN_NONE;
}

static PyObject *
ef_code_state(PyObject *m, PyObject *code)
{
    if (check_code(code) < 0)
        return NULL;
    ExtraState *st = get_extra_state(code);
    if (st == NULL)
        return Py_BuildValue("{s:O,s:O,s:O,s:n}", "skip", Py_False, "transformed", Py_False,
                             "stopped", Py_False, "entries", (Py_ssize_t)0);
    return Py_BuildValue("{s:O,s:O,s:O,s:n}", "skip", st->skip_user ? Py_True : Py_False,
                         "transformed", st->skip_inner ? Py_True : Py_False, "stopped",
                         st->stopped ? Py_True : Py_False, "entries",
                         st->entries ? PyList_GET_SIZE(st->entries) : (Py_ssize_t)0);
}

static PyObject *
ef_cache_entries(PyObject *m, PyObject *code)
{
    if (check_code(code) < 0)
        return NULL;
    ExtraState *st = get_extra_state(code);
    PyObject *out = PyList_New(0);
    if (out == NULL || st == NULL || st->entries == NULL)
        return out;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(st->entries); i++) {
        PyObject *e = PyList_GET_ITEM(st->entries, i);
        if (PyList_Append(out, PyTuple_GET_ITEM(e, 2)) < 0) {
            Py_DECREF(out);
            return NULL;
        }
    }
    return out;
}

static PyObject *
ef_reset(PyObject *m, PyObject *noargs)
{
    /* detach first, release after: releasing runs arbitrary code that may touch the cache */
    PyObject *dropped = PyList_New(0);
    if (dropped == NULL)
        return NULL;
    for (ExtraState *st = g_registry.next; st != &g_registry; st = st->next) {
        st->skip_user = 0;
        st->stopped = 0;
        if (st->entries != NULL) {
            if (PyList_Append(dropped, st->entries) < 0) {
                Py_DECREF(dropped);
                return NULL;
            }
            Py_CLEAR(st->entries);
        }
    }
    Py_DECREF(dropped);
    Py_RETURN_NONE;
}

static PyObject *
ef_set_cache_limit(PyObject *m, PyObject *arg)
{
    Py_ssize_t n = PyLong_AsSsize_t(arg);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    if (n < 1) {
        PyErr_SetString(PyExc_ValueError, "the cache limit must be at least 1");
        return NULL;
    }
    Py_ssize_t old = g_cache_limit;
    g_cache_limit = n;
    return PyLong_FromSsize_t(old);
}

static PyObject *
ef_get_cache_limit(PyObject *m, PyObject *noargs)
{
    return PyLong_FromSsize_t(g_cache_limit);
}

static PyObject *
ef_hook_installed(PyObject *m, PyObject *noargs)
{
    PyInterpreterState *interp = PyInterpreterState_Get();
    return PyBool_FromLong(_PyInterpreterState_GetEvalFrameFunc(interp) == danlu_eval_frame);
}

static PyObject *
ef_stats(PyObject *m, PyObject *noargs)
{
    return Py_BuildValue("{s:K,s:K,s:K,s:K,s:K,s:n,s:K}", "frames", n_frames, "hits", n_hits,
                         "misses", n_misses, "compiles", n_compiles, "cache_limit_hits",
                         n_eager, "active_threads", g_active_threads,
                         "datastack_chunks_freed", n_chunks_freed);
}

static PyObject *
ef_reset_stats(PyObject *m, PyObject *noargs)
{
    n_frames = n_hits = n_misses = n_compiles = n_eager = n_chunks_freed = 0;
    Py_RETURN_NONE;
}

static PyObject *
ef_install_helpers(PyObject *m, PyObject *args)
{
    PyObject *validate, *on_limit;
    if (!PyArg_ParseTuple(args, "OO", &validate, &on_limit))
        return NULL;
    Py_XSETREF(g_validate, Py_NewRef(validate));
    Py_XSETREF(g_on_cache_limit, Py_NewRef(on_limit));
    Py_RETURN_NONE;
}

static PyMethodDef ef_methods[] = {
    {"set_eval_frame", ef_set_eval_frame, METH_O,
     "set_eval_frame(callback) -> previous: None (off), False (run-only) or a callable."},
    {"get_eval_frame", ef_get_eval_frame, METH_NOARGS, "This thread's current callback."},
    {"mark_skip", ef_mark_skip, METH_O, "Never show frames of this code to the callback."},
    {"code_state", ef_code_state, METH_O, "The cache state of a code object, as a dict."},
    {"cache_entries", ef_cache_entries, METH_O, "GuardedCode entries, most recent hit first."},
    {"reset", ef_reset, METH_NOARGS, "Drop every cache entry, skip mark and recompile stop."},
    {"set_cache_limit", ef_set_cache_limit, METH_O, "Set the recompile limit; returns the old."},
    {"get_cache_limit", ef_get_cache_limit, METH_NOARGS, "The recompile limit."},
    {"hook_installed", ef_hook_installed, METH_NOARGS, "Is the frame hook installed now?"},
    {"stats", ef_stats, METH_NOARGS, "Counters since the last reset_stats()."},
    {"reset_stats", ef_reset_stats, METH_NOARGS, "Zero the counters."},
    {"_install_helpers", ef_install_helpers, METH_VARARGS, "(validate, on_cache_limit)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef ef_module = {PyModuleDef_HEAD_INIT, "danlu_dynamo._eval_frame",
                                       "The PEP 523 frame hook and per-code cache.", -1,
                                       ef_methods};

PyMODINIT_FUNC
PyInit__eval_frame(void)
{
    if (g_extra_index < 0) {
        g_extra_index = REQUEST_CODE_EXTRA_INDEX(free_extra_state);
        if (g_extra_index < 0)
            return NULL;
    }
    PyObject *m = PyModule_Create(&ef_module);
    if (m == NULL)
        return NULL;
    if (g_frame_type == NULL) {
        g_frame_type = PyType_FromSpec(&FrameInfo_spec);
        if (g_frame_type == NULL) {
            Py_DECREF(m);
            return NULL;
        }
    }
    if (PyModule_AddObjectRef(m, "FrameInfo", g_frame_type) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
