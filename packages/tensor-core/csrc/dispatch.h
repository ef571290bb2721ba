// ember._C.make_dispatch: the dispatcher's positional hot path (ember/_ops/_dispatch.py, `dispatch`) in C.
//
// The Python function is the reference and stays: this one takes the calls that its inline loop takes
// without further work and hands every other call to it, unchanged, before doing anything. Per call of a
// small op the Python frame of `dispatch` (its loop over the arguments, two thread-local reads, the
// look-ups of the recorder and the checked kernel, the wrapping of the result) cost about half a
// microsecond, as much as numpy's own work on 16 floats; here it is a few attribute reads.
//
// It takes a call `dispatch(op, args, kwargs)` when:
// * `kwargs` is None or an empty dict and `args` a tuple;
// * every argument is a plain tensor (`Tensor` or a type of PLAIN_TENSOR_TYPES) or of a type in
//   _PLAIN_TYPES (numbers, None, str, dtype, ...; no sequences), at least one a tensor, and all the
//   tensors have the same device object;
// * no dispatch mode is active (`state.modes` empty).
// Then, as the reference:
// 1. when a tensor requires grad, an autograd handler is installed and grad mode is on: the op's
//    recorder in `autograd_recorders` (its result unless NotImplemented), else the handler;
// 2. else the op's checked kernel for the device type, its array wrapped in a new Tensor
//    (`object.__new__(Tensor)`, `_data`, `_device`), unless it declines;
// 3. else `run_backend(op, args, kwargs, device)`.
// A MemoryError or AttributeError raised by any of these goes to `failed(op, args, kwargs, device, exc)`,
// the reference's except clauses. `_autograd_handler` and `autograd_recorders` are read from the
// module's globals at each call, so set_autograd_handler and tests that swap them act on both paths.
//
// Included by engine.cpp (one translation unit for the per-op hot paths of the C extension).
#pragma once

#include <pybind11/pybind11.h>

namespace ember_dispatch {

namespace py = pybind11;

struct Dispatch {
  PyObject* reference;           // _dispatch.dispatch (the Python hot path)
  PyObject* tensor_type;         // ember.Tensor
  PyObject* plain_tensor_types;  // PLAIN_TENSOR_TYPES (a set; may grow)
  PyObject* plain_types;         // _PLAIN_TYPES (a frozenset)
  PyObject* state;               // the per-thread dispatcher state (threading.local)
  PyObject* globals;             // _dispatch's module dict
  PyObject* run_backend;         // run_backend(op, args, kwargs, device)
  PyObject* failed;              // failed(op, args, kwargs, device, exc): re-raises as the reference does
  PyObject* empty;               // ()
  // interned names
  PyObject *s_device, *s_requires_grad, *s_modes, *s_grad_enabled, *s_checked, *s_type, *s_data, *s_handler,
      *s_recorders;
};

inline PyObject* intern(const char* text) {
  PyObject* s = PyUnicode_InternFromString(text);
  if (s == nullptr) throw py::error_already_set();
  return s;
}

inline Dispatch* dispatch_of(PyObject* capsule) {
  return static_cast<Dispatch*>(PyCapsule_GetPointer(capsule, "ember.dispatch"));
}

// Whether the type of `v` is a plain tensor type; -1 on error.
inline int plain_tensor(const Dispatch* d, PyObject* v) {
  PyObject* t = reinterpret_cast<PyObject*>(Py_TYPE(v));
  if (t == d->tensor_type) return 1;
  return PySet_Contains(d->plain_tensor_types, t);
}

inline PyObject* call_reference(const Dispatch* d, PyObject* op, PyObject* args, PyObject* kwargs) {
  PyObject* argv[3] = {op, args, kwargs};
  return PyObject_Vectorcall(d->reference, argv, 3, nullptr);
}

// The reference's except clauses for MemoryError and AttributeError; anything else passes as it is.
inline PyObject* on_error(const Dispatch* d, PyObject* op, PyObject* args, PyObject* kwargs, PyObject* device) {
  if (!PyErr_ExceptionMatches(PyExc_MemoryError) && !PyErr_ExceptionMatches(PyExc_AttributeError)) return nullptr;
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  PyErr_NormalizeException(&type, &value, &traceback);
  if (traceback != nullptr) PyException_SetTraceback(value, traceback);
  PyObject* argv[5] = {op, args, kwargs, device, value};
  PyObject* result = PyObject_Vectorcall(d->failed, argv, 5, nullptr);  // raises
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(traceback);
  Py_XDECREF(result);
  return nullptr;
}

// Steps 1 to 3 for a call the scan took; `device` is borrowed.
inline PyObject* run(const Dispatch* d, PyObject* op, PyObject* args, PyObject* kwargs, PyObject* device,
                     bool needs_grad) {
  if (needs_grad) {
    PyObject* handler = PyDict_GetItemWithError(d->globals, d->s_handler);  // borrowed
    if (handler == nullptr && PyErr_Occurred()) return nullptr;
    if (handler != nullptr && handler != Py_None) {
      PyObject* enabled = PyObject_GetAttr(d->state, d->s_grad_enabled);
      if (enabled == nullptr) return nullptr;
      int on = PyObject_IsTrue(enabled);
      Py_DECREF(enabled);
      if (on < 0) return nullptr;
      if (on) {
        PyObject* recorders = PyDict_GetItemWithError(d->globals, d->s_recorders);  // borrowed
        if (recorders == nullptr && PyErr_Occurred()) return nullptr;
        PyObject* recorder = nullptr;
        if (recorders != nullptr && PyDict_Check(recorders)) {
          recorder = PyDict_GetItemWithError(recorders, op);  // borrowed
          if (recorder == nullptr && PyErr_Occurred()) return nullptr;
        }
        if (recorder != nullptr && recorder != Py_None) {
          Py_INCREF(recorder);
          PyObject* argv[2] = {args, device};
          PyObject* result = PyObject_Vectorcall(recorder, argv, 2, nullptr);
          Py_DECREF(recorder);
          if (result == nullptr) return on_error(d, op, args, kwargs, device);
          if (result != Py_NotImplemented) return result;
          Py_DECREF(result);
        }
        Py_INCREF(handler);
        PyObject* argv[4] = {op, args, kwargs, device};
        PyObject* result = PyObject_Vectorcall(handler, argv, 4, nullptr);
        Py_DECREF(handler);
        if (result == nullptr) return on_error(d, op, args, kwargs, device);
        return result;
      }
    }
  }
  PyObject* kernels = PyObject_GetAttr(op, d->s_checked);
  if (kernels == nullptr) return nullptr;
  PyObject* checked = nullptr;
  if (PyDict_Check(kernels)) {
    PyObject* type = PyObject_GetAttr(device, d->s_type);
    if (type == nullptr) {
      Py_DECREF(kernels);
      return nullptr;
    }
    checked = PyDict_GetItemWithError(kernels, type);  // borrowed from kernels
    Py_DECREF(type);
    if (checked == nullptr && PyErr_Occurred()) {
      Py_DECREF(kernels);
      return nullptr;
    }
    Py_XINCREF(checked);
  }
  Py_DECREF(kernels);
  if (checked != nullptr) {
    PyObject* array = PyObject_Call(checked, args, nullptr);
    Py_DECREF(checked);
    if (array == nullptr) return on_error(d, op, args, kwargs, device);
    if (array != Py_None) {
      PyTypeObject* tensor = reinterpret_cast<PyTypeObject*>(d->tensor_type);
      PyObject* result = PyBaseObject_Type.tp_new(tensor, d->empty, nullptr);  // object.__new__(Tensor)
      if (result == nullptr || PyObject_SetAttr(result, d->s_data, array) < 0 ||
          PyObject_SetAttr(result, d->s_device, device) < 0) {
        Py_XDECREF(result);
        Py_DECREF(array);
        return nullptr;
      }
      Py_DECREF(array);
      return result;
    }
    Py_DECREF(array);
  }
  PyObject* argv[4] = {op, args, kwargs, device};
  PyObject* result = PyObject_Vectorcall(d->run_backend, argv, 4, nullptr);
  if (result == nullptr) return on_error(d, op, args, kwargs, device);
  return result;
}

// dispatch(op, args, kwargs): the scan, then run() or the reference.
inline PyObject* dispatch(PyObject* capsule, PyObject* const* argv, Py_ssize_t nargs) {
  if (nargs != 3) {
    PyErr_SetString(PyExc_TypeError, "dispatch(op, args, kwargs) takes 3 positional arguments");
    return nullptr;
  }
  const Dispatch* d = dispatch_of(capsule);
  if (d == nullptr) return nullptr;
  PyObject *op = argv[0], *args = argv[1], *kwargs = argv[2];
  if (!PyTuple_CheckExact(args) || (kwargs != Py_None && (!PyDict_CheckExact(kwargs) || PyDict_GET_SIZE(kwargs))))
    return call_reference(d, op, args, kwargs);
  PyObject* device = nullptr;  // a new reference once set
  bool needs_grad = false;
  Py_ssize_t count = PyTuple_GET_SIZE(args);
  for (Py_ssize_t i = 0; i < count; ++i) {
    PyObject* a = PyTuple_GET_ITEM(args, i);
    int plain = plain_tensor(d, a);
    if (plain < 0) {
      Py_XDECREF(device);
      return nullptr;
    }
    if (plain) {
      PyObject* own = PyObject_GetAttr(a, d->s_device);
      if (own == nullptr) {
        Py_XDECREF(device);
        return nullptr;
      }
      if (device == nullptr) {
        device = own;
      } else {
        Py_DECREF(own);
        if (own != device) {  // two device objects: the reference works the common device out
          Py_DECREF(device);
          return call_reference(d, op, args, kwargs);
        }
      }
      PyObject* flag = PyObject_GetAttr(a, d->s_requires_grad);
      if (flag == nullptr) {
        Py_DECREF(device);
        return nullptr;
      }
      int grad = PyObject_IsTrue(flag);
      Py_DECREF(flag);
      if (grad < 0) {
        Py_DECREF(device);
        return nullptr;
      }
      needs_grad = needs_grad || grad;
      continue;
    }
    int other = PySet_Contains(d->plain_types, reinterpret_cast<PyObject*>(Py_TYPE(a)));
    if (other <= 0) {  // a sequence, a subclass, a proxy: the reference's general scan
      Py_XDECREF(device);
      return other < 0 ? nullptr : call_reference(d, op, args, kwargs);
    }
  }
  if (device == nullptr) return call_reference(d, op, args, kwargs);  // no tensor: a factory
  PyObject* modes = PyObject_GetAttr(d->state, d->s_modes);
  if (modes == nullptr) {
    Py_DECREF(device);
    return nullptr;
  }
  int active = PyObject_IsTrue(modes);
  Py_DECREF(modes);
  if (active != 0) {
    Py_DECREF(device);
    return active < 0 ? nullptr : call_reference(d, op, args, kwargs);
  }
  PyObject* result = run(d, op, args, kwargs, device, needs_grad);
  Py_DECREF(device);
  return result;
}

inline PyMethodDef* method_def() {
  static PyMethodDef def = {"dispatch", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&dispatch)),
                            METH_FASTCALL,
                            "The dispatcher's positional hot path in C (csrc/dispatch.h); the Python "
                            "ember._ops._dispatch.dispatch is its reference."};
  return &def;
}

// make_dispatch(helpers) -> the builtin dispatch(op, args, kwargs) (its state lives as long as it does).
inline py::object make_dispatch(py::dict helpers) {
  auto* d = new Dispatch();
  auto take = [&](const char* key) {
    PyObject* v = PyDict_GetItemString(helpers.ptr(), key);
    if (v == nullptr) throw py::key_error(key);
    Py_INCREF(v);
    return v;
  };
  d->reference = take("reference");
  d->tensor_type = take("tensor_type");
  d->plain_tensor_types = take("plain_tensor_types");
  d->plain_types = take("plain_types");
  d->state = take("state");
  d->globals = take("globals");
  d->run_backend = take("run_backend");
  d->failed = take("failed");
  if (!PyType_Check(d->tensor_type) || !PySet_Check(d->plain_tensor_types) || !PyAnySet_Check(d->plain_types) ||
      !PyDict_Check(d->globals))
    throw py::type_error("make_dispatch: unexpected helper types");
  d->empty = PyTuple_New(0);
  d->s_device = intern("_device");
  d->s_requires_grad = intern("_requires_grad");
  d->s_modes = intern("modes");
  d->s_grad_enabled = intern("grad_enabled");
  d->s_checked = intern("checked_kernels");
  d->s_type = intern("type");
  d->s_data = intern("_data");
  d->s_handler = intern("_autograd_handler");
  d->s_recorders = intern("autograd_recorders");
  // (the state is never freed: the function may be held until the interpreter ends)
  PyObject* capsule = PyCapsule_New(d, "ember.dispatch", nullptr);
  if (capsule == nullptr) throw py::error_already_set();
  PyObject* fn = PyCFunction_New(method_def(), capsule);
  Py_DECREF(capsule);
  if (fn == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(fn);
}

}  // namespace ember_dispatch
