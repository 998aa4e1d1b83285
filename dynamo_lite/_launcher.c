/*
 * _launcher.c -- one launcher for every Triton kernel the triton backend compiles.
 *
 * Triton 3.x generates a C launcher per kernel signature and builds it with the host compiler (a
 * gcc run of about a second per signature: two thirds of the compile workers' time on a GPT-2).
 * This one launches any kernel Triton compiled: it takes the kernel's CUfunction (Triton loads
 * the module), the grid, the block size, the shared memory and the stream, and the arguments
 * with one kind character each, packs them as Triton's generated launcher does and calls
 * cuLaunchKernel.  Which kernels it may launch, and each argument's kind, is decided in Python
 * (backends/triton/generic_launch.py); this file only packs and launches.
 *
 * The driver is found at run time (dlopen("libcuda.so.1"), dlsym), so this builds without CUDA
 * headers and without a GPU; `error()` says why it cannot launch where there is no driver.
 *
 * Kinds (a byte each; the packing is the C type of Triton's launcher and the PyArg format it
 * parses with, so values are converted, range-checked and truncated the same way):
 *   P pointer: an int (an address), None (null), or an object with data_ptr() (checked with
 *     cuPointerGetAttribute, as Triton does: a CPU tensor is a ValueError)
 *   b i8 (format 'b': 0..255), h i16, i i32, q i64; B u8 / u1, H u16, I u32 (masked), Q u64
 *   e fp16, z bf16 (truncated, as Triton does), f fp32, d fp64
 *   x not passed: a constexpr, or an argument Triton specialized into the kernel
 * After the arguments come two null pointers: the global and profile scratch buffers every Triton
 * 3.x kernel takes (the Python side refuses kernels that need either).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>

/* the few driver types used, as cuda.h declares them */
typedef int CUresult;
typedef void *CUfunction;
typedef void *CUstream;
typedef void *CUcontext;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
#define CUDA_SUCCESS 0
#define CUDA_ERROR_INVALID_VALUE 1
#define CU_POINTER_ATTRIBUTE_DEVICE_POINTER 3

typedef CUresult (*cuLaunchKernel_t)(CUfunction, unsigned int, unsigned int, unsigned int, unsigned int,
                                     unsigned int, unsigned int, unsigned int, CUstream, void **, void **);
typedef CUresult (*cuPointerGetAttribute_t)(void *, int, CUdeviceptr);
typedef CUresult (*cuGetErrorString_t)(CUresult, const char **);
typedef CUresult (*cuCtxGetCurrent_t)(CUcontext *);
typedef CUresult (*cuCtxSetCurrent_t)(CUcontext);
typedef CUresult (*cuDeviceGet_t)(CUdevice *, int);
typedef CUresult (*cuDevicePrimaryCtxRetain_t)(CUcontext *, CUdevice);

static struct {
    int tried;
    char error[512];                    /* why it cannot launch; empty once loaded */
    char path[256];
    cuLaunchKernel_t launch;
    cuPointerGetAttribute_t pointer_attribute;
    cuGetErrorString_t error_string;
    cuCtxGetCurrent_t ctx_get_current;
    cuCtxSetCurrent_t ctx_set_current;
    cuDeviceGet_t device_get;
    cuDevicePrimaryCtxRetain_t primary_ctx_retain;
} driver;

#define MAX_ARGS 512

static int load_driver(const char *path) {
    driver.tried = 1;
    void *lib = dlopen(path, RTLD_LAZY);
    if (lib == NULL) {
        const char *why = dlerror();
        snprintf(driver.error, sizeof driver.error, "cannot load the CUDA driver: %s", why ? why : path);
        return -1;
    }
    struct { const char *name; void **slot; } symbols[] = {
        {"cuLaunchKernel", (void **)&driver.launch},
        {"cuPointerGetAttribute", (void **)&driver.pointer_attribute},
        {"cuGetErrorString", (void **)&driver.error_string},
        {"cuCtxGetCurrent", (void **)&driver.ctx_get_current},
        {"cuCtxSetCurrent", (void **)&driver.ctx_set_current},
        {"cuDeviceGet", (void **)&driver.device_get},
        {"cuDevicePrimaryCtxRetain", (void **)&driver.primary_ctx_retain},
    };
    for (size_t i = 0; i < sizeof symbols / sizeof symbols[0]; i++) {
        *symbols[i].slot = dlsym(lib, symbols[i].name);
        if (*symbols[i].slot == NULL) {
            snprintf(driver.error, sizeof driver.error, "%s has no %s", path, symbols[i].name);
            for (size_t j = 0; j < sizeof symbols / sizeof symbols[0]; j++) *symbols[j].slot = NULL;
            return -1;
        }
    }
    driver.error[0] = '\0';
    snprintf(driver.path, sizeof driver.path, "%s", path);
    return 0;
}

static int ensure_driver(void) {
    if (!driver.tried) load_driver("libcuda.so.1");
    if (driver.launch != NULL) return 0;
    PyErr_Format(PyExc_RuntimeError, "dynamo_lite's generic launcher cannot launch: %s", driver.error);
    return -1;
}

static int cuda_error(CUresult code, const char *what) {
    const char *text = NULL;
    if (driver.error_string == NULL || driver.error_string(code, &text) != CUDA_SUCCESS || text == NULL)
        text = "unknown error";
    PyErr_Format(PyExc_RuntimeError, "Triton Error [CUDA]: %s (%s, from dynamo_lite's generic launcher)", text, what);
    return -1;
}

/* As Triton's launcher does first: a thread with no current context gets device 0's primary one. */
static int ensure_context(void) {
    CUcontext context = NULL;
    CUresult r = driver.ctx_get_current(&context);
    if (r != CUDA_SUCCESS) return cuda_error(r, "cuCtxGetCurrent");
    if (context != NULL) return 0;
    CUdevice device;
    if ((r = driver.device_get(&device, 0)) != CUDA_SUCCESS) return cuda_error(r, "cuDeviceGet");
    if ((r = driver.primary_ctx_retain(&context, device)) != CUDA_SUCCESS) return cuda_error(r, "cuDevicePrimaryCtxRetain");
    if ((r = driver.ctx_set_current(context)) != CUDA_SUCCESS) return cuda_error(r, "cuCtxSetCurrent");
    return 0;
}

/* Triton's getPointer: an int is an address, None is null, anything else answers data_ptr(). */
static int pack_pointer(PyObject *obj, Py_ssize_t index, uint64_t *out) {
    if (PyLong_Check(obj)) {
        *out = PyLong_AsUnsignedLongLong(obj);
        return PyErr_Occurred() ? -1 : 0;
    }
    if (obj == Py_None) {
        *out = 0;
        return 0;
    }
    PyObject *ret = PyObject_CallMethod(obj, "data_ptr", NULL);
    if (ret == NULL || !PyLong_Check(ret)) {
        Py_XDECREF(ret);
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "Pointer argument (at %zd) must be either uint64 or have a data_ptr method "
                     "returning an int", index);
        return -1;
    }
    uint64_t address = PyLong_AsUnsignedLongLong(ret);
    Py_DECREF(ret);
    if (PyErr_Occurred()) return -1;
    if (address != 0 && driver.pointer_attribute != NULL) {
        uint64_t device_address;
        CUresult r = driver.pointer_attribute(&device_address, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, address);
        if (r == CUDA_ERROR_INVALID_VALUE) {
            PyErr_Format(PyExc_ValueError, "Pointer argument (at %zd) cannot be accessed from Triton (cpu tensor?)", index);
            return -1;
        }
        if (r != CUDA_SUCCESS) return cuda_error(r, "cuPointerGetAttribute");
        address = device_address;
    }
    *out = address;
    return 0;
}

static int signed_in_range(PyObject *obj, long lo, long hi, const char *what, long *out) {
    long v = PyLong_AsLong(obj);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (v < lo || v > hi) {
        PyErr_Format(PyExc_OverflowError, "%s argument %ld is out of range [%ld, %ld]", what, v, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

static int float_value(PyObject *obj, double *out) {
    *out = PyFloat_AsDouble(obj);
    return (*out == -1.0 && PyErr_Occurred()) ? -1 : 0;
}

/* Packs argument `obj` of `kind` into `slot` (its first `*size` bytes, little-endian); 1 when the
 * kind is 'x' (not passed), -1 on an error (set). */
static int pack_arg(char kind, PyObject *obj, Py_ssize_t index, uint64_t *slot, size_t *size) {
    long v;
    double d;
    *slot = 0;
    switch (kind) {
    case 'x': return 1;
    case 'P': *size = 8; return pack_pointer(obj, index, slot);
    case 'b':
        if (signed_in_range(obj, 0, UCHAR_MAX, "i8 (Triton parses it as an unsigned byte)", &v) < 0) return -1;
        *(uint8_t *)slot = (uint8_t)v; *size = 1; return 0;
    case 'h':
        if (signed_in_range(obj, SHRT_MIN, SHRT_MAX, "i16", &v) < 0) return -1;
        *(int16_t *)slot = (int16_t)v; *size = 2; return 0;
    case 'i':
        if (signed_in_range(obj, INT_MIN, INT_MAX, "i32", &v) < 0) return -1;
        *(int32_t *)slot = (int32_t)v; *size = 4; return 0;
    case 'q': {
        long long w = PyLong_AsLongLong(obj);
        if (w == -1 && PyErr_Occurred()) return -1;
        *(int64_t *)slot = (int64_t)w; *size = 8; return 0;
    }
    case 'B': case 'H': case 'I': {
        unsigned long u = PyLong_AsUnsignedLongMask(obj);
        if (u == (unsigned long)-1 && PyErr_Occurred()) return -1;
        if (kind == 'B') { *(uint8_t *)slot = (uint8_t)u; *size = 1; }
        else if (kind == 'H') { *(uint16_t *)slot = (uint16_t)u; *size = 2; }
        else { *(uint32_t *)slot = (uint32_t)u; *size = 4; }
        return 0;
    }
    case 'Q':
        if (!PyLong_Check(obj)) {            /* format 'K' takes ints only */
            PyErr_Format(PyExc_TypeError, "u64 argument (at %zd) must be an int", index);
            return -1;
        }
        *slot = PyLong_AsUnsignedLongLongMask(obj); *size = 8;
        return PyErr_Occurred() ? -1 : 0;
    case 'e':
        if (float_value(obj, &d) < 0) return -1;
        *size = 2;
        return PyFloat_Pack2(d, (char *)slot, 1) < 0 ? -1 : 0;
    case 'z': {
        if (float_value(obj, &d) < 0) return -1;
        float f = (float)d;
        uint32_t bits;
        memcpy(&bits, &f, 4);
        *(uint16_t *)slot = (uint16_t)(bits >> 16); *size = 2; return 0;
    }
    case 'f': {
        if (float_value(obj, &d) < 0) return -1;
        float f = (float)d;
        memcpy(slot, &f, 4); *size = 4; return 0;
    }
    case 'd':
        if (float_value(obj, &d) < 0) return -1;
        memcpy(slot, &d, 8); *size = 8; return 0;
    default:
        PyErr_Format(PyExc_ValueError, "unknown argument kind %c (at %zd)", kind, index);
        return -1;
    }
}

/* Packs args[0:n] by kinds into slots; returns how many were passed, or -1. */
static Py_ssize_t pack_all(PyObject *kinds, PyObject *const *args, Py_ssize_t n, uint64_t *slots, size_t *sizes) {
    if (!PyBytes_Check(kinds) || PyBytes_GET_SIZE(kinds) != n) {
        PyErr_Format(PyExc_TypeError, "kinds must be bytes with one kind per argument (%zd arguments)", n);
        return -1;
    }
    if (n > MAX_ARGS) {
        PyErr_Format(PyExc_ValueError, "more than %d kernel arguments", MAX_ARGS);
        return -1;
    }
    const char *k = PyBytes_AS_STRING(kinds);
    Py_ssize_t passed = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int r = pack_arg(k[i], args[i], i, &slots[passed], &sizes[passed]);
        if (r < 0) return -1;
        if (r == 0) passed++;
    }
    return passed;
}

static PyObject *pack(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 1) {
        PyErr_SetString(PyExc_TypeError, "pack(kinds, *args)");
        return NULL;
    }
    uint64_t slots[MAX_ARGS];
    size_t sizes[MAX_ARGS];
    Py_ssize_t passed = pack_all(args[0], args + 1, nargs - 1, slots, sizes);
    if (passed < 0) return NULL;
    char buffer[MAX_ARGS * 8];
    size_t length = 0;
    for (Py_ssize_t i = 0; i < passed; i++) {
        memcpy(buffer + length, &slots[i], sizes[i]);
        length += sizes[i];
    }
    return PyBytes_FromStringAndSize(buffer, (Py_ssize_t)length);
}

#define LAUNCH_HEAD 8   /* function, grid x, y, z, threads, shared, stream, kinds */

static PyObject *launch(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < LAUNCH_HEAD) {
        PyErr_SetString(PyExc_TypeError, "launch(function, grid_x, grid_y, grid_z, threads, shared, stream, kinds, *args)");
        return NULL;
    }
    if (ensure_driver() < 0 || ensure_context() < 0) return NULL;
    unsigned long long function = PyLong_AsUnsignedLongLong(args[0]);
    unsigned long dims[5];
    for (int i = 0; i < 5; i++) dims[i] = PyLong_AsUnsignedLong(args[1 + i]);
    unsigned long long stream = PyLong_AsUnsignedLongLong(args[6]);
    if (PyErr_Occurred()) return NULL;
    uint64_t slots[MAX_ARGS];
    size_t sizes[MAX_ARGS];
    Py_ssize_t passed = pack_all(args[7], args + LAUNCH_HEAD, nargs - LAUNCH_HEAD, slots, sizes);
    if (passed < 0) return NULL;
    uint64_t global_scratch = 0, profile_scratch = 0;
    void *params[MAX_ARGS + 2];
    for (Py_ssize_t i = 0; i < passed; i++) params[i] = &slots[i];
    params[passed] = &global_scratch;
    params[passed + 1] = &profile_scratch;
    if (dims[0] * dims[1] * dims[2] == 0) Py_RETURN_NONE;      /* as Triton: an empty grid launches nothing */
    CUresult r;
    Py_BEGIN_ALLOW_THREADS
    r = driver.launch((CUfunction)(uintptr_t)function, (unsigned)dims[0], (unsigned)dims[1], (unsigned)dims[2],
                      (unsigned)dims[3], 1, 1, (unsigned)dims[4], (CUstream)(uintptr_t)stream, params, NULL);
    Py_END_ALLOW_THREADS
    if (r != CUDA_SUCCESS) {
        cuda_error(r, "cuLaunchKernel");
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *load(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    const char *path = "libcuda.so.1";
    if (nargs > 1) {
        PyErr_SetString(PyExc_TypeError, "load(path=None)");
        return NULL;
    }
    if (nargs == 1 && args[0] != Py_None) {
        path = PyUnicode_AsUTF8(args[0]);
        if (path == NULL) return NULL;
    }
    if (load_driver(path) < 0) {
        PyErr_SetString(PyExc_OSError, driver.error);
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *error(PyObject *self, PyObject *unused) {
    if (!driver.tried) load_driver("libcuda.so.1");
    if (driver.launch != NULL) Py_RETURN_NONE;
    return PyUnicode_FromString(driver.error);
}

static PyMethodDef methods[] = {
    {"launch", (PyCFunction)(void (*)(void))launch, METH_FASTCALL,
     "launch(function, grid_x, grid_y, grid_z, threads, shared, stream, kinds, *args): cuLaunchKernel"},
    {"pack", (PyCFunction)(void (*)(void))pack, METH_FASTCALL,
     "pack(kinds, *args) -> bytes: the arguments launch would pass, each in its size, concatenated"},
    {"load", (PyCFunction)(void (*)(void))load, METH_FASTCALL,
     "load(path=None): load the CUDA driver (default libcuda.so.1); OSError when it cannot"},
    {"error", error, METH_NOARGS, "why launches cannot be made (the driver did not load), or None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_launcher",
                                    "dynamo_lite's generic launcher of Triton kernels.", -1, methods};

PyMODINIT_FUNC PyInit__launcher(void) { return PyModule_Create(&module); }
