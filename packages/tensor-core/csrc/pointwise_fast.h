// ember._C.make_unary_fast / make_binary_fast: the common call of a pointwise op's checked CPU kernel in C.
//
// The Python kernels stay the reference: `unary`'s checked_cpu (ember/_ops/_pointwise_helpers.py) and
// BinaryRule.direct (ember/_ops/_binary_plan.py). On 16 floats numpy's ufunc call costs about half a
// microsecond and the Python around it (the dtype plan, the size test, numpy's error state) as much
// again; these functions make the same checks and the same ufunc call without the frame, and hand every
// other call to the reference, unchanged, before computing anything:
// * unary `f(input)`: `input` a Tensor (exactly) whose `_data` is a numpy array (exactly) of one or more
//   dims, fewer than `native_min` elements when the op has a native kernel, of a dtype in `as_is` (those
//   whose plan computes and returns the input's own dtype, with no extra check);
// * binary `f(input, other)`: two such tensors of one shape and one dtype, the dtype in the rule's live
//   `_as_is` set (filled as plans are made; emptied while fast paths are disabled).
// Then `np_fn(array[, other_array])` runs under numpy's quiet error state (the context variable
// `error_state` set to `ignore`, unless it already is), as the reference does; a result that is not an
// array of the input's dtype (or of `result_dtype`: a comparison's bool) goes to the reference too.
//
// Included by engine.cpp (one translation unit for the per-op hot paths of the C extension).
#pragma once

#include <pybind11/pybind11.h>

namespace ember_pointwise_fast {

namespace py = pybind11;

struct Fast {
  PyObject* np_fn;        // the numpy ufunc
  PyObject* reference;    // the Python kernel
  PyObject* as_is;        // a set or frozenset of numpy dtypes
  Py_ssize_t native_min;  // size from which the reference's native kernel runs (-1: none)
  PyObject* error_state;  // numpy's error-state context variable
  PyObject* ignore;       // its every-error-ignored value
  PyObject* tensor_type;  // ember.Tensor
  PyObject* ndarray_type; // numpy.ndarray
  PyObject* result_dtype; // the result's dtype when it is not the input's (a comparison's bool), or None
  PyObject *s_data, *s_dtype, *s_ndim, *s_size, *s_shape;
};

inline PyObject* intern(const char* text) {
  PyObject* s = PyUnicode_InternFromString(text);
  if (s == nullptr) throw py::error_already_set();
  return s;
}

inline PyObject* reference(const Fast* f, PyObject* const* argv, Py_ssize_t nargs) {
  return PyObject_Vectorcall(f->reference, argv, nargs, nullptr);
}

// The array of a Tensor argument when the fast path may take it (a new reference), else nullptr (no error).
inline PyObject* array_of(const Fast* f, PyObject* t) {
  if (reinterpret_cast<PyObject*>(Py_TYPE(t)) != f->tensor_type) return nullptr;
  PyObject* data = PyObject_GetAttr(t, f->s_data);
  if (data == nullptr) {
    PyErr_Clear();
    return nullptr;
  }
  if (reinterpret_cast<PyObject*>(Py_TYPE(data)) != f->ndarray_type) {
    Py_DECREF(data);
    return nullptr;
  }
  return data;
}

// An integer attribute of an array; -1 on failure (error cleared).
inline Py_ssize_t int_attr(PyObject* array, PyObject* name) {
  PyObject* v = PyObject_GetAttr(array, name);
  if (v == nullptr) {
    PyErr_Clear();
    return -1;
  }
  Py_ssize_t n = PyLong_AsSsize_t(v);
  Py_DECREF(v);
  if (n == -1 && PyErr_Occurred()) PyErr_Clear();
  return n;
}

// Whether `array` (of `dtype`, borrowed) is one the fast path computes on: 1, 0, or -1 on error.
inline int takes(const Fast* f, PyObject* array, PyObject* dtype) {
  int in = PySet_Contains(f->as_is, dtype);
  if (in <= 0) return in;
  Py_ssize_t ndim = int_attr(array, f->s_ndim);
  if (ndim < 1) return 0;  // (numpy answers zero-dim arrays with scalars)
  if (f->native_min >= 0) {
    Py_ssize_t size = int_attr(array, f->s_size);
    if (size < 0 || size >= f->native_min) return 0;
  }
  return 1;
}

// np_fn(args) under numpy's quiet error state.
inline PyObject* quiet_call(const Fast* f, PyObject* const* args, Py_ssize_t n) {
  PyObject* current = nullptr;
  if (PyContextVar_Get(f->error_state, nullptr, &current) < 0) return nullptr;
  bool already = current == f->ignore;
  Py_XDECREF(current);
  if (already) return PyObject_Vectorcall(f->np_fn, args, n, nullptr);
  PyObject* token = PyContextVar_Set(f->error_state, f->ignore);
  if (token == nullptr) return nullptr;
  PyObject* result = PyObject_Vectorcall(f->np_fn, args, n, nullptr);
  if (PyContextVar_Reset(f->error_state, token) < 0) {
    Py_XDECREF(result);
    result = nullptr;
  }
  Py_DECREF(token);
  return result;
}

// The result when it is an array of `dtype`; else released and nullptr (no error) for the reference.
inline PyObject* checked_result(const Fast* f, PyObject* result, PyObject* dtype) {
  if (reinterpret_cast<PyObject*>(Py_TYPE(result)) == f->ndarray_type) {
    PyObject* got = PyObject_GetAttr(result, f->s_dtype);
    if (got != nullptr) {
      Py_DECREF(got);
      if (got == dtype) return result;
    } else {
      PyErr_Clear();
    }
  }
  Py_DECREF(result);
  return nullptr;
}

inline PyObject* unary(PyObject* capsule, PyObject* const* argv, Py_ssize_t nargs) {
  const Fast* f = static_cast<const Fast*>(PyCapsule_GetPointer(capsule, "ember.pointwise_fast"));
  if (f == nullptr) return nullptr;
  if (nargs != 1) return reference(f, argv, nargs);
  PyObject* data = array_of(f, argv[0]);
  if (data == nullptr) return reference(f, argv, nargs);
  PyObject* dtype = PyObject_GetAttr(data, f->s_dtype);
  if (dtype == nullptr) {
    Py_DECREF(data);
    return nullptr;
  }
  int ok = takes(f, data, dtype);
  PyObject* result = nullptr;
  if (ok > 0) {
    result = quiet_call(f, &data, 1);
    if (result != nullptr) result = checked_result(f, result, dtype);
    else ok = -1;
  }
  Py_DECREF(dtype);
  Py_DECREF(data);
  if (ok < 0) return nullptr;
  return result != nullptr ? result : reference(f, argv, nargs);
}

inline PyObject* binary(PyObject* capsule, PyObject* const* argv, Py_ssize_t nargs) {
  const Fast* f = static_cast<const Fast*>(PyCapsule_GetPointer(capsule, "ember.pointwise_fast"));
  if (f == nullptr) return nullptr;
  if (nargs != 2) return reference(f, argv, nargs);
  PyObject* a = array_of(f, argv[0]);
  if (a == nullptr) return reference(f, argv, nargs);
  PyObject* b = array_of(f, argv[1]);
  if (b == nullptr) {
    Py_DECREF(a);
    return reference(f, argv, nargs);
  }
  PyObject* result = nullptr;
  int ok = 0;
  PyObject* da = PyObject_GetAttr(a, f->s_dtype);
  PyObject* db = da != nullptr ? PyObject_GetAttr(b, f->s_dtype) : nullptr;
  if (da == nullptr || db == nullptr) {
    ok = -1;
  } else if (da == db) {
    ok = takes(f, a, da);
    if (ok > 0) {
      PyObject* sa = PyObject_GetAttr(a, f->s_shape);
      PyObject* sb = sa != nullptr ? PyObject_GetAttr(b, f->s_shape) : nullptr;
      if (sa == nullptr || sb == nullptr) {
        ok = -1;
      } else {
        ok = PyObject_RichCompareBool(sa, sb, Py_EQ);
      }
      Py_XDECREF(sa);
      Py_XDECREF(sb);
    }
    if (ok > 0) {
      PyObject* args[2] = {a, b};
      result = quiet_call(f, args, 2);
      if (result != nullptr) result = checked_result(f, result, f->result_dtype == Py_None ? da : f->result_dtype);
      else ok = -1;
    }
  }
  Py_XDECREF(da);
  Py_XDECREF(db);
  Py_DECREF(a);
  Py_DECREF(b);
  if (ok < 0) return nullptr;
  return result != nullptr ? result : reference(f, argv, nargs);
}

inline py::object make(py::dict helpers, PyMethodDef* def) {
  auto* f = new Fast();
  auto take = [&](const char* key) {
    PyObject* v = PyDict_GetItemString(helpers.ptr(), key);
    if (v == nullptr) throw py::key_error(key);
    Py_INCREF(v);
    return v;
  };
  f->np_fn = take("np_fn");
  f->reference = take("reference");
  f->as_is = take("as_is");
  f->error_state = take("error_state");
  f->ignore = take("ignore");
  f->tensor_type = take("tensor_type");
  f->ndarray_type = take("ndarray_type");
  f->result_dtype = take("result_dtype");
  PyObject* native_min = take("native_min");
  f->native_min = native_min == Py_None ? -1 : PyLong_AsSsize_t(native_min);
  Py_DECREF(native_min);
  if (f->native_min == -1 && PyErr_Occurred()) throw py::error_already_set();
  if (!PyAnySet_Check(f->as_is) || !PyContextVar_CheckExact(f->error_state))
    throw py::type_error("make_*_fast: as_is must be a set and error_state a ContextVar");
  f->s_data = intern("_data");
  f->s_dtype = intern("dtype");
  f->s_ndim = intern("ndim");
  f->s_size = intern("size");
  f->s_shape = intern("shape");
  // (never freed: the function may be held until the interpreter ends)
  PyObject* capsule = PyCapsule_New(f, "ember.pointwise_fast", nullptr);
  if (capsule == nullptr) throw py::error_already_set();
  PyObject* fn = PyCFunction_New(def, capsule);
  Py_DECREF(capsule);
  if (fn == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(fn);
}

inline py::object make_unary(py::dict helpers) {
  static PyMethodDef def = {"unary_fast", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&unary)),
                            METH_FASTCALL, "A unary op's checked CPU kernel, common call in C (csrc/pointwise_fast.h)."};
  return make(helpers, &def);
}

inline py::object make_binary(py::dict helpers) {
  static PyMethodDef def = {"binary_fast", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&binary)),
                            METH_FASTCALL, "A binary op's direct CPU kernel, common call in C (csrc/pointwise_fast.h)."};
  return make(helpers, &def);
}

}  // namespace ember_pointwise_fast
