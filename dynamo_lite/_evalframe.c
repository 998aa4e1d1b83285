/*
 * _evalframe.c -- the PEP 523 frame-evaluation hook of dynamo_lite.
 *
 * Mechanism only, no policy.  Every frame CPython starts while the hook is installed comes here.
 * Fast paths in C decide "run it as is": no callback for this thread, generator/coroutine or
 * non-function frames, frames being resumed or thrown into, frames under a tracer, code marked
 * SKIP in its co_extra slot.  Code marked NOHOOK runs as is with this thread's callback switched
 * off until it returns (torch's own machinery that calls Python functions it is handed: eager
 * torch.cond compiling with TorchDynamo, torch.func's transforms).  Otherwise the code's cache (a list of (guard, code) pairs kept in
 * co_extra by the Python side) is tried: the first guard that accepts the frame's arguments
 * supplies the replacement code.  On a miss the Python callback is asked; it returns None (run the
 * frame as is) or replacement code.
 *
 * Replacement code runs *in the original frame*: the replacement has the same argument layout,
 * cells and free variables (convert_frame.py checks this), so we swap f_code, grow the frame on
 * the thread's data stack to the new co_framesize and restart it at instruction 0.  CPython's own
 * evaluator then runs and clears the frame, which sidesteps the 3.11/3.12 difference in who
 * clears a frame that the hook did not evaluate: we always evaluate it.  When the chunk has no
 * room for the replacement (a graph with hundreds of parameters has as many locals; a deep call
 * stack leaves little of the 16 KiB chunk), the Python `frame runner` runs the replacement as a
 * function of its own -- CPython gives that frame a new chunk -- and hands back a one-instruction
 * code (`return value` or `raise exc`) that fits the frame, which then runs as always.  Only a
 * frame that is not the top of the data stack runs unchanged (correct, not captured).
 *
 * While guards and the callback run, this thread's callback is switched off, so nothing of
 * dynamo_lite is ever intercepted; DisabledCall does the same for compiled graphs.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <frameobject.h>

#define Py_BUILD_CORE
#if PY_VERSION_HEX >= 0x030C0000
#undef _PyGC_FINALIZED
#endif
#include <internal/pycore_frame.h>
#undef Py_BUILD_CORE

#if PY_VERSION_HEX < 0x030B0000 || PY_VERSION_HEX >= 0x030E0000
#error "dynamo_lite's frame hook supports CPython 3.11 to 3.13 only"
#endif

/* Where the frame keeps its code and how far it has run: 3.13 keeps the code in f_executable and
 * points at the next instruction (instr_ptr); 3.11 and 3.12 keep f_code and point at the last one
 * run (prev_instr, one before the first instruction when the frame has not started). */
#if PY_VERSION_HEX >= 0x030D0000
#define FRAME_CODE(f) ((PyCodeObject *)(f)->f_executable)
#define SET_FRAME_CODE(f, co) ((f)->f_executable = (PyObject *)(co))
#define FRAME_AT_START(f, co) ((f)->instr_ptr == _PyCode_CODE(co))
#define RESTART_FRAME(f, co) ((f)->instr_ptr = _PyCode_CODE(co))
#else
#define FRAME_CODE(f) ((f)->f_code)
#define SET_FRAME_CODE(f, co) ((f)->f_code = (co))
#define FRAME_AT_START(f, co) ((f)->prev_instr == _PyCode_CODE(co) - 1)
#define RESTART_FRAME(f, co) ((f)->prev_instr = _PyCode_CODE(co) - 1)
#endif

#if PY_VERSION_HEX >= 0x030C0000
#define FRAME_FUNC(f) ((f)->f_funcobj)
#define FRAME_SIZE(co) ((co)->co_framesize)
#define CODE_GET_EXTRA PyUnstable_Code_GetExtra
#define CODE_SET_EXTRA PyUnstable_Code_SetExtra
#define REQUEST_EXTRA_INDEX PyUnstable_Eval_RequestCodeExtraIndex
#else
#define FRAME_FUNC(f) ((PyObject *)(f)->f_func)
#define FRAME_SIZE(co) ((co)->co_nlocalsplus + (co)->co_stacksize + FRAME_SPECIALS_SIZE)
#define CODE_GET_EXTRA _PyCode_GetExtra
#define CODE_SET_EXTRA _PyCode_SetExtra
#define REQUEST_EXTRA_INDEX _PyEval_RequestCodeExtraIndex
#endif

static Py_tss_t callback_key = Py_tss_NEEDS_INIT;  /* owned ref, NULL when off */
static Py_ssize_t extra_index = -1;
static PyObject *skip_sentinel = NULL;
static PyObject *nohook_sentinel = NULL;
static int active_threads = 0;                       /* threads whose callback is set */
static _PyFrameEvalFunction previous_eval = NULL;
static long long stat_hits = 0, stat_misses = 0, stat_new_frames = 0;

/* Python: runner(code, func, args, frame_code) runs `code` as a function in a frame of its own and
 * returns code of frame_code's layout that returns its result or raises its exception. */
static PyObject *frame_runner = NULL;

static inline PyObject *get_callback(void) { return (PyObject *)PyThread_tss_get(&callback_key); }

static PyObject *dl_eval_frame(PyThreadState *, _PyInterpreterFrame *, int);
static PyObject *evaluate(PyThreadState *, _PyInterpreterFrame *, int);

/* Deep recursion. While the hook is installed CPython evaluates every Python call in a new C call
 * of the evaluator (no inlining), so a recursion that eager runs on a flat C stack would overflow
 * it (a segfault on 3.11) or hit 3.12's C recursion limit. When one thread nests MAX_HOOK_DEPTH
 * evaluations, the hook is taken off the interpreter until that evaluation returns: deeper frames
 * (of every thread, meanwhile) run exactly as without dynamo_lite, only not captured. */
#define MAX_HOOK_DEPTH 200
static _Thread_local int hook_depth = 0;             /* evaluations of this thread nested in the hook */
static int deep_threads = 0;                         /* threads past MAX_HOOK_DEPTH */
/* Frames of code marked NOHOOK running (torch's own machinery): the hook is off the interpreter
 * meanwhile, as for deep threads, so machinery that installs an eval function of its own
 * (TorchDynamo, compiling eager torch.cond's branches) never finds ours to chain back to. */
static int nohook_frames = 0;

/* The hook is installed while some thread has a callback and no thread is too deep. */
static void update_eval_func(void) {
    PyInterpreterState *interp = PyInterpreterState_Get();
    _PyFrameEvalFunction current = _PyInterpreterState_GetEvalFrameFunc(interp);
    int wanted = active_threads > 0 && deep_threads == 0 && nohook_frames == 0;
    if (wanted && current != dl_eval_frame) {
        previous_eval = current;
        _PyInterpreterState_SetEvalFrameFunc(interp, dl_eval_frame);
    } else if (!wanted && current == dl_eval_frame) {
        _PyInterpreterState_SetEvalFrameFunc(interp, previous_eval ? previous_eval : _PyEval_EvalFrameDefault);
    }
}

static void install_if_needed(int delta) {
    active_threads += delta;
    update_eval_func();
}

static PyObject *evaluate(PyThreadState *tstate, _PyInterpreterFrame *frame, int throwflag) {
    int deepest = ++hook_depth == MAX_HOOK_DEPTH;
    if (deepest) { deep_threads++; update_eval_func(); }
    PyObject *result = previous_eval != NULL && previous_eval != dl_eval_frame
        ? previous_eval(tstate, frame, throwflag) : _PyEval_EvalFrameDefault(tstate, frame, throwflag);
    if (deepest) { deep_threads--; update_eval_func(); }
    hook_depth--;
    return result;
}

/* Swap the thread's callback; takes a new reference to `cb` (NULL or None = off), returns the old one (owned). */
static PyObject *swap_callback(PyObject *cb) {
    if (cb == Py_None) cb = NULL;
    PyObject *old = get_callback();
    Py_XINCREF(cb);
    PyThread_tss_set(&callback_key, cb);
    if ((old == NULL) != (cb == NULL)) install_if_needed(cb ? 1 : -1);
    return old;
}

static inline Py_ssize_t frame_nargs(PyCodeObject *code) {
    Py_ssize_t n = code->co_argcount + code->co_kwonlyargcount;
    if (code->co_flags & CO_VARARGS) n++;
    if (code->co_flags & CO_VARKEYWORDS) n++;
    return n;
}

/* Put `new_code` into the not-yet-started frame. Returns 0 when it cannot be done safely. */
static int swap_code(PyThreadState *tstate, _PyInterpreterFrame *frame, PyCodeObject *new_code, Py_ssize_t nargs) {
    PyCodeObject *old = FRAME_CODE(frame);
    PyObject **base = (PyObject **)frame;
    if (base + FRAME_SIZE(old) != tstate->datastack_top) return 0;
    PyObject **new_top = base + FRAME_SIZE(new_code);
    if (new_top > tstate->datastack_limit) return 0;
    if (new_code->co_nlocalsplus < nargs) return 0;
    for (int i = (int)nargs; i < new_code->co_nlocalsplus; i++) frame->localsplus[i] = NULL;
    tstate->datastack_top = new_top;
    Py_INCREF(new_code);
    SET_FRAME_CODE(frame, new_code);
    Py_DECREF(old);
    RESTART_FRAME(frame, new_code);
    frame->stacktop = new_code->co_nlocalsplus;
    return 1;
}

/* The replacement did not fit the frame's data-stack chunk: run it in a frame of its own through
 * the Python frame runner, then put the runner's one-instruction code (which fits: the frame's
 * own locals and a stack of one) in the frame. 1: done; 0: not possible, the frame runs
 * unchanged; -1: an error is set. */
static int run_in_new_frame(PyThreadState *tstate, _PyInterpreterFrame *frame, PyCodeObject *code,
                            PyObject *func) {
    PyCodeObject *old = FRAME_CODE(frame);
    if (frame_runner == NULL || old->co_stacksize < 1) return 0;
    if ((PyObject **)frame + FRAME_SIZE(old) != tstate->datastack_top) return 0;
    Py_ssize_t nargs = frame_nargs(old);
    PyObject *argtuple = PyTuple_New(nargs);
    if (argtuple == NULL) return -1;
    for (Py_ssize_t i = 0; i < nargs; i++) {
        Py_INCREF(frame->localsplus[i]);
        PyTuple_SET_ITEM(argtuple, i, frame->localsplus[i]);
    }
    stat_new_frames++;
    PyObject *ending = PyObject_CallFunctionObjArgs(frame_runner, (PyObject *)code, func, argtuple,
                                                    (PyObject *)old, NULL);
    Py_DECREF(argtuple);
    if (ending == NULL) return -1;
    int ok = PyCode_Check(ending) && swap_code(tstate, frame, (PyCodeObject *)ending, nargs);
    Py_DECREF(ending);
    if (!ok) {
        PyErr_SetString(PyExc_SystemError, "dynamo_lite: the frame runner's code does not fit the frame");
        return -1;
    }
    return 1;
}

/* Try the cache entries; returns a new reference to the code to run, or NULL on a miss. Moves a hit
 * to the front. Guards are Python code: while one runs, another thread may insert or drop entries,
 * so the size is read again every step, the entry is kept alive across its guard call, and a hit
 * is found again by identity before it moves. */
static PyObject *lookup(PyObject *entries, PyObject *const *args, Py_ssize_t nargs) {
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(entries); i++) {
        PyObject *entry = PyList_GET_ITEM(entries, i);
        if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) < 2) continue;
        Py_INCREF(entry);
        PyObject *ok = PyObject_Vectorcall(PyTuple_GET_ITEM(entry, 0), args, (size_t)nargs, NULL);
        int hit = ok == Py_True;
        if (ok == NULL) PyErr_Clear();                    /* a guard that raises fails */
        Py_XDECREF(ok);
        if (!hit) { Py_DECREF(entry); continue; }
        for (Py_ssize_t j = 1; j < PyList_GET_SIZE(entries); j++) {   /* most recently used first */
            if (PyList_GET_ITEM(entries, j) != entry) continue;
            if (PySequence_DelItem(entries, j) < 0 || PyList_Insert(entries, 0, entry) < 0) PyErr_Clear();
            break;
        }
        PyObject *code = PyTuple_GET_ITEM(entry, 1);
        Py_INCREF(code);
        Py_DECREF(entry);
        return code;
    }
    return NULL;
}

#define SMALL_ARGS 16

/* Run a frame of NOHOOK code with this thread's callback off and the hook off the interpreter (the
 * TSS slot's reference to the callback is kept meanwhile). */
static PyObject *evaluate_without_hook(PyThreadState *tstate, _PyInterpreterFrame *frame, int throwflag,
                                       PyObject *callback) {
    PyThread_tss_set(&callback_key, NULL);
    nohook_frames++;
    update_eval_func();
    PyObject *r = evaluate(tstate, frame, throwflag);
    nohook_frames--;
    update_eval_func();
    PyThread_tss_set(&callback_key, callback);
    return r;
}

static PyObject *dl_eval_frame(PyThreadState *tstate, _PyInterpreterFrame *frame, int throwflag) {
    PyObject *callback = get_callback();
    PyCodeObject *code = FRAME_CODE(frame);
    if (callback == NULL || throwflag) goto run_default;
    if ((code->co_flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR)) || !(code->co_flags & CO_OPTIMIZED))
        goto run_default;
    if (!FRAME_AT_START(frame, code)) goto run_default;       /* resumed, not started */
    if (frame->owner != FRAME_OWNED_BY_THREAD || frame->f_locals != NULL || frame->frame_obj != NULL)
        goto run_default;
#if PY_VERSION_HEX < 0x030C0000
    if (tstate->cframe->use_tracing) goto run_default;
#endif
    if (tstate->tracing) goto run_default;

    void *extra = NULL;
    if (CODE_GET_EXTRA((PyObject *)code, extra_index, &extra) < 0) { PyErr_Clear(); goto run_default; }
    if (extra == skip_sentinel) goto run_default;
    if (extra == nohook_sentinel) return evaluate_without_hook(tstate, frame, throwflag, callback);

    /* From here on Python code of ours runs: switch this thread's callback off (no refcount traffic). */
    PyThread_tss_set(&callback_key, NULL);
    Py_INCREF(callback);
    Py_INCREF(code);
    PyObject *func = FRAME_FUNC(frame);
    Py_ssize_t nargs = frame_nargs(code);
    PyObject *small[SMALL_ARGS + 1];
    PyObject **args = nargs + 1 <= SMALL_ARGS + 1 ? small : PyMem_Malloc(sizeof(PyObject *) * (nargs + 1));
    PyObject *result = NULL;       /* owned: the code to run, None, or NULL for an error */
    if (args == NULL) { PyErr_NoMemory(); goto restore; }
    args[0] = func;
    for (Py_ssize_t i = 0; i < nargs; i++) args[i + 1] = frame->localsplus[i];

    if (extra != NULL && PyList_Check((PyObject *)extra)) {
        PyObject *entries = (PyObject *)extra;
        Py_INCREF(entries);
        PyObject *hit = lookup(entries, args, nargs + 1);
        Py_DECREF(entries);
        if (hit != NULL) { stat_hits++; result = hit; goto restore; }
    }
    stat_misses++;
    {
        PyObject *argtuple = PyTuple_New(nargs);
        if (argtuple != NULL) {
            for (Py_ssize_t i = 0; i < nargs; i++) { Py_INCREF(args[i + 1]); PyTuple_SET_ITEM(argtuple, i, args[i + 1]); }
            result = PyObject_CallFunctionObjArgs(callback, (PyObject *)code, func, argtuple, NULL);
            Py_DECREF(argtuple);
        }
    }
restore:
    if (args != NULL && args != small) PyMem_Free(args);
    {
        /* Restore the callback unless the callback itself changed it meanwhile (it may not). */
        PyThread_tss_set(&callback_key, callback);
        Py_DECREF(callback);   /* the TSS slot keeps its own reference, taken by swap_callback */
    }
    Py_DECREF(code);
    if (result == NULL) {
        /* The callback raised (fullgraph=True, KeyboardInterrupt): unwind the unstarted frame with the
         * error set, exactly like generator.throw(); the evaluator then clears the frame itself. */
        return _PyEval_EvalFrameDefault(tstate, frame, 1);
    }
    if (PyCode_Check(result) && result != (PyObject *)FRAME_CODE(frame)
            && !swap_code(tstate, frame, (PyCodeObject *)result, frame_nargs(FRAME_CODE(frame)))
            && run_in_new_frame(tstate, frame, (PyCodeObject *)result, FRAME_FUNC(frame)) < 0) {
        Py_DECREF(result);
        return _PyEval_EvalFrameDefault(tstate, frame, 1);     /* unwind with the error, as above */
    }
    if (result == nohook_sentinel) {      /* the callback marked the code NOHOOK: this first run too */
        Py_DECREF(result);
        return evaluate_without_hook(tstate, frame, throwflag, callback);
    }
    Py_DECREF(result);
run_default:
    return evaluate(tstate, frame, throwflag);
}

static void free_extra(void *extra) { Py_XDECREF((PyObject *)extra); }

/* ---------------- Python-visible functions ---------------- */

static PyObject *py_set_callback(PyObject *self, PyObject *cb) {
    if (cb != Py_None && !PyCallable_Check(cb)) {
        PyErr_SetString(PyExc_TypeError, "callback must be callable or None");
        return NULL;
    }
    PyObject *old = swap_callback(cb);
    if (old == NULL) Py_RETURN_NONE;
    return old;
}

static PyObject *py_set_frame_runner(PyObject *self, PyObject *runner) {
    if (runner != Py_None && !PyCallable_Check(runner)) {
        PyErr_SetString(PyExc_TypeError, "runner must be callable or None");
        return NULL;
    }
    Py_XSETREF(frame_runner, runner == Py_None ? NULL : Py_NewRef(runner));
    Py_RETURN_NONE;
}

static PyObject *py_get_callback(PyObject *self, PyObject *unused) {
    PyObject *cb = get_callback();
    if (cb == NULL) Py_RETURN_NONE;
    Py_INCREF(cb);
    return cb;
}

static PyObject *py_get_code_extra(PyObject *self, PyObject *code) {
    if (!PyCode_Check(code)) { PyErr_SetString(PyExc_TypeError, "expected a code object"); return NULL; }
    void *extra = NULL;
    if (CODE_GET_EXTRA(code, extra_index, &extra) < 0) return NULL;
    if (extra == NULL) Py_RETURN_NONE;
    Py_INCREF((PyObject *)extra);
    return (PyObject *)extra;
}

static PyObject *py_set_code_extra(PyObject *self, PyObject *args) {
    PyObject *code, *value;
    if (!PyArg_ParseTuple(args, "O!O", &PyCode_Type, &code, &value)) return NULL;
    PyObject *stored = value == Py_None ? NULL : value;
    Py_XINCREF(stored);
    /* SetExtra itself hands the previous value to free_extra, which drops our reference to it. */
    if (CODE_SET_EXTRA(code, extra_index, stored) < 0) { Py_XDECREF(stored); return NULL; }
    Py_RETURN_NONE;
}

static PyObject *py_stats(PyObject *self, PyObject *unused) {
    return Py_BuildValue("{s:L,s:L,s:L,s:i}", "hits", stat_hits, "misses", stat_misses, "new_frames", stat_new_frames,
                         "active_threads", active_threads);
}

/* ---------------- DisabledCall: run a callable with this thread's hook off ---------------- */

typedef struct {
    PyObject_HEAD
    PyObject *fn;
    vectorcallfunc vectorcall;
} DisabledCall;

static PyObject *disabled_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    PyObject *saved = get_callback();
    PyThread_tss_set(&callback_key, NULL);
    PyObject *r = PyObject_Vectorcall(((DisabledCall *)self)->fn, args, nargsf, kwnames);
    PyThread_tss_set(&callback_key, saved);
    return r;
}

static PyObject *disabled_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *fn;
    if (!PyArg_ParseTuple(args, "O", &fn)) return NULL;
    DisabledCall *self = (DisabledCall *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    Py_INCREF(fn);
    self->fn = fn;
    self->vectorcall = disabled_vectorcall;
    return (PyObject *)self;
}

static int disabled_traverse(DisabledCall *self, visitproc visit, void *arg) { Py_VISIT(self->fn); return 0; }
static int disabled_clear(DisabledCall *self) { Py_CLEAR(self->fn); return 0; }
static void disabled_dealloc(DisabledCall *self) {
    PyObject_GC_UnTrack(self);
    disabled_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *disabled_get_fn(DisabledCall *self, void *closure) { Py_INCREF(self->fn); return self->fn; }
static PyGetSetDef disabled_getset[] = {{"fn", (getter)disabled_get_fn, NULL, "the wrapped callable", NULL}, {NULL}};

static PyTypeObject DisabledCallType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "dynamo_lite._evalframe.DisabledCall",
    .tp_doc = "DisabledCall(fn): calls fn with this thread's frame hook switched off.",
    .tp_basicsize = sizeof(DisabledCall),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = disabled_new,
    .tp_dealloc = (destructor)disabled_dealloc,
    .tp_traverse = (traverseproc)disabled_traverse,
    .tp_clear = (inquiry)disabled_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(DisabledCall, vectorcall),
    .tp_getset = disabled_getset,
};

/* ---------------- type_version: what a class's attributes are now, as one number ---------------- */

/* CPython keeps a version tag per type (tp_version_tag) for its method cache: any change of an
 * attribute of the type or of a base gives it a new tag.  A guard comparing tags sees every change
 * of a class's methods, properties and class attributes at the cost of one call.  Tags are
 * assigned lazily; 0 means none could be (the class changed too often): such a guard never passes. */
static PyObject *version_probe = NULL;   /* a name to look up so that the tag gets assigned (3.11) */

static PyObject *py_type_version(PyObject *self, PyObject *cls) {
    if (!PyType_Check(cls)) { PyErr_SetString(PyExc_TypeError, "type_version() expects a class"); return NULL; }
    PyTypeObject *type = (PyTypeObject *)cls;
#if PY_VERSION_HEX >= 0x030C0000
    PyUnstable_Type_AssignVersionTag(type);
#else
    (void)_PyType_Lookup(type, version_probe);
#endif
    return PyLong_FromUnsignedLong(type->tp_version_tag);
}

/* ---------------- no_module_hooks: a module's four hook tables are empty ---------------- */

/* `not (d['_forward_hooks'] or d['_forward_pre_hooks'] or d['_backward_hooks'] or
 * d['_backward_pre_hooks'])` for a module's __dict__ d, as one call: a guard per inlined module
 * (~260 for a ViT-B), where the Python expression costs ~0.25 us.  A missing table raises
 * KeyError, as the expression does; a table that is not a plain dict or OrderedDict answers
 * through its own truth value. */
static PyObject *hook_tables[4];

static PyObject *py_no_module_hooks(PyObject *self, PyObject *d) {
    if (!PyDict_Check(d)) { PyErr_SetString(PyExc_TypeError, "no_module_hooks() expects a module's __dict__"); return NULL; }
    for (int i = 0; i < 4; i++) {
        PyObject *table = PyDict_GetItemWithError(d, hook_tables[i]);     /* borrowed */
        if (table == NULL) {
            if (!PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, hook_tables[i]);
            return NULL;
        }
        int full = (PyDict_CheckExact(table) || PyODict_CheckExact(table)) ? PyDict_GET_SIZE(table) != 0
                                                                          : PyObject_IsTrue(table);
        if (full < 0) return NULL;
        if (full) Py_RETURN_FALSE;
    }
    Py_RETURN_TRUE;
}

/* ---------------- address / distinct: identity tests without builtins.id ---------------- */

/* `id()` raises the audit event "builtins.id": once any library installs a Python audit hook
 * (filelock does at import, on 3.12+: Hugging Face and torch.compile import it), each id() call
 * runs that hook, ~0.2 us instead of ~0.03.  A guard pins objects by address and checks that a
 * graph's inputs are distinct objects (a ResNet-50: 268 of them) through these two instead. */
static PyObject *py_address(PyObject *self, PyObject *o) {
    return PyLong_FromVoidPtr(o);
}

static int compare_addresses(const void *a, const void *b) {
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return (x > y) - (x < y);
}

static PyObject *py_distinct(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    if (n <= 8) {                                   /* a few: compare every pair */
        for (Py_ssize_t i = 0; i < n; i++)
            for (Py_ssize_t j = i + 1; j < n; j++)
                if (args[i] == args[j]) Py_RETURN_FALSE;
        Py_RETURN_TRUE;
    }
    uintptr_t local[128];
    uintptr_t *sorted = n <= 128 ? local : PyMem_Malloc(n * sizeof(uintptr_t));
    if (sorted == NULL) return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < n; i++) sorted[i] = (uintptr_t)args[i];
    qsort(sorted, (size_t)n, sizeof(uintptr_t), compare_addresses);
    int distinct = 1;
    for (Py_ssize_t i = 1; i < n && distinct; i++) distinct = sorted[i] != sorted[i - 1];
    if (sorted != local) PyMem_Free(sorted);
    return PyBool_FromLong(distinct);
}

static PyMethodDef methods[] = {
    {"address", py_address, METH_O, "address(obj) -> id(obj), without the builtins.id audit event."},
    {"distinct", (PyCFunction)(void (*)(void))py_distinct, METH_FASTCALL, "distinct(*objs) -> whether no object is passed twice."},
    {"no_module_hooks", py_no_module_hooks, METH_O, "no_module_hooks(module.__dict__) -> whether its four hook tables are empty."},
    {"type_version", py_type_version, METH_O, "type_version(cls) -> its attribute version tag (0: none)."},
    {"set_callback", py_set_callback, METH_O, "set_callback(cb) -> previous: this thread's capture callback (None = off)."},
    {"get_callback", py_get_callback, METH_NOARGS, "get_callback() -> this thread's callback or None."},
    {"get_code_extra", py_get_code_extra, METH_O, "get_code_extra(code) -> the object in our co_extra slot, or None."},
    {"set_code_extra", py_set_code_extra, METH_VARARGS, "set_code_extra(code, obj): store obj (None clears)."},
    {"set_frame_runner", py_set_frame_runner, METH_O,
     "set_frame_runner(fn): fn(code, func, args, frame_code) runs replacement code too big for its frame."},
    {"stats", py_stats, METH_NOARGS, "stats() -> {'hits', 'misses', 'new_frames', 'active_threads'}."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_evalframe", "dynamo_lite's PEP 523 frame hook.", -1, methods};

PyMODINIT_FUNC PyInit__evalframe(void) {
    if (PyThread_tss_create(&callback_key) != 0) return PyErr_NoMemory();
    extra_index = REQUEST_EXTRA_INDEX(free_extra);
    if (extra_index < 0) { PyErr_SetString(PyExc_RuntimeError, "no co_extra index available"); return NULL; }
    if (PyType_Ready(&DisabledCallType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    version_probe = PyUnicode_InternFromString("__dynamo_lite_version__");
    if (version_probe == NULL) return NULL;
    const char *tables[4] = {"_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks"};
    for (int i = 0; i < 4; i++) {
        hook_tables[i] = PyUnicode_InternFromString(tables[i]);
        if (hook_tables[i] == NULL) return NULL;
    }
    skip_sentinel = PyObject_CallNoArgs((PyObject *)&PyBaseObject_Type);
    if (skip_sentinel == NULL) return NULL;
    Py_INCREF(skip_sentinel);
    PyModule_AddObject(m, "SKIP", skip_sentinel);
    nohook_sentinel = PyObject_CallNoArgs((PyObject *)&PyBaseObject_Type);
    if (nohook_sentinel == NULL) return NULL;
    Py_INCREF(nohook_sentinel);
    PyModule_AddObject(m, "NOHOOK", nohook_sentinel);
    Py_INCREF(&DisabledCallType);
    PyModule_AddObject(m, "DisabledCall", (PyObject *)&DisabledCallType);
    return m;
}
