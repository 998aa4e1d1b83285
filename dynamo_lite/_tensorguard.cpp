// _tensorguard.cpp -- a fast TENSOR_MATCH check for dynamo_lite's guards.
//
// TensorCheck(cls, dtype, device, sizes, strides, requires_grad) builds a callable that answers,
// for one tensor, "same Python type, dtype, device, rank, sizes, strides and requires_grad?"
// reading the C++ tensor directly (a Python-level check pays ~6 attribute lookups and tuple
// allocations per tensor). A size or stride of None is a wildcard (dynamic dimension).
// Optional: guards fall back to generated Python when this extension is not built.
#include <Python.h>
#include <torch/csrc/Device.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/autograd/python_variable.h>

#include <cstdint>
#include <limits>
#include <vector>

namespace {

constexpr int64_t kAny = std::numeric_limits<int64_t>::min();

struct TensorCheck {
  PyObject_HEAD
  PyTypeObject* cls;
  at::ScalarType dtype;
  c10::Device device;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  bool requires_grad;
  vectorcallfunc vectorcall;
};

bool matches(TensorCheck* self, PyObject* obj) {
  if (Py_TYPE(obj) != self->cls) return false;
  const at::Tensor& t = THPVariable_Unpack(obj);
  if (t.scalar_type() != self->dtype || t.device() != self->device) return false;
  if (t.requires_grad() != self->requires_grad) return false;
  const auto n = static_cast<size_t>(t.dim());
  if (n != self->sizes.size()) return false;
  auto sizes = t.sym_sizes();
  auto strides = t.sym_strides();
  for (size_t i = 0; i < n; i++) {
    if (self->sizes[i] != kAny && sizes[i] != self->sizes[i]) return false;
    if (self->strides[i] != kAny && strides[i] != self->strides[i]) return false;
  }
  return true;
}

PyObject* check_vectorcall(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  if (PyVectorcall_NARGS(nargsf) != 1 || kwnames != nullptr) {
    PyErr_SetString(PyExc_TypeError, "TensorCheck takes exactly one tensor");
    return nullptr;
  }
  PyObject* obj = args[0];
  if (!THPVariable_Check(obj)) Py_RETURN_FALSE;
  try {
    if (matches(reinterpret_cast<TensorCheck*>(self), obj)) Py_RETURN_TRUE;
  } catch (...) {
  }
  Py_RETURN_FALSE;
}

bool read_dims(PyObject* seq, std::vector<int64_t>& out) {
  PyObject* fast = PySequence_Fast(seq, "sizes and strides must be sequences");
  if (fast == nullptr) return false;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject* item = PySequence_Fast_GET_ITEM(fast, i);
    if (item == Py_None) {
      out.push_back(kAny);
    } else {
      long long v = PyLong_AsLongLong(item);
      if (v == -1 && PyErr_Occurred()) { Py_DECREF(fast); return false; }
      out.push_back(v);
    }
  }
  Py_DECREF(fast);
  return true;
}

PyObject* check_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  PyObject *cls, *dtype, *device, *sizes, *strides;
  int requires_grad;
  if (!PyArg_ParseTuple(args, "OOOOOp", &cls, &dtype, &device, &sizes, &strides, &requires_grad)) return nullptr;
  if (!PyType_Check(cls) || !THPDtype_Check(dtype) || !THPDevice_Check(device)) {
    PyErr_SetString(PyExc_TypeError, "TensorCheck(cls, dtype, device, sizes, strides, requires_grad)");
    return nullptr;
  }
  auto* self = reinterpret_cast<TensorCheck*>(type->tp_alloc(type, 0));
  if (self == nullptr) return nullptr;
  new (&self->sizes) std::vector<int64_t>();
  new (&self->strides) std::vector<int64_t>();
  new (&self->device) c10::Device(reinterpret_cast<THPDevice*>(device)->device);
  Py_INCREF(cls);
  self->cls = reinterpret_cast<PyTypeObject*>(cls);
  self->dtype = reinterpret_cast<THPDtype*>(dtype)->scalar_type;
  self->requires_grad = requires_grad != 0;
  self->vectorcall = check_vectorcall;
  if (!read_dims(sizes, self->sizes) || !read_dims(strides, self->strides)) {
    Py_DECREF(self);
    return nullptr;
  }
  return reinterpret_cast<PyObject*>(self);
}

void check_dealloc(TensorCheck* self) {
  Py_XDECREF(self->cls);
  self->sizes.~vector();
  self->strides.~vector();
  Py_TYPE(self)->tp_free(reinterpret_cast<PyObject*>(self));
}

PyTypeObject TensorCheckType = {PyVarObject_HEAD_INIT(nullptr, 0)};

struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_tensorguard", "Fast tensor guards.", -1, nullptr};

}  // namespace

PyMODINIT_FUNC PyInit__tensorguard(void) {
  TensorCheckType.tp_name = "dynamo_lite._tensorguard.TensorCheck";
  TensorCheckType.tp_basicsize = sizeof(TensorCheck);
  TensorCheckType.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL;
  TensorCheckType.tp_new = check_new;
  TensorCheckType.tp_dealloc = reinterpret_cast<destructor>(check_dealloc);
  TensorCheckType.tp_call = PyVectorcall_Call;
  TensorCheckType.tp_vectorcall_offset = offsetof(TensorCheck, vectorcall);
  TensorCheckType.tp_doc = "TensorCheck(cls, dtype, device, sizes, strides, requires_grad)(tensor) -> bool";
  if (PyType_Ready(&TensorCheckType) < 0) return nullptr;
  PyObject* m = PyModule_Create(&module_def);
  if (m == nullptr) return nullptr;
  Py_INCREF(&TensorCheckType);
  PyModule_AddObject(m, "TensorCheck", reinterpret_cast<PyObject*>(&TensorCheckType));
  return m;
}
