// ember._C.PositionalRecorder: ember-autograd's positional recorder (ember/autograd/_record.py,
// _fast_recorder's record_positional) in C++, for its most common calls.
//
// The Python recorder is the reference and stays: this object holds it and hands it every call it
// does not take, and ember-autograd's tests build the same calls' nodes both ways and compare them
// (tests/test_record_native.py, and tests/test_record_paths.py against make_node). Recording a
// small op in Python costs about three times PyTorch's (attribute stores, tuples, a frame per
// helper); the steps below are the same, made with the C API.
//
// It takes a call `record(args, device)` when:
// * `args` is exactly the op's differentiable arguments (no trailing positional arguments), each a
//   plain tensor (Tensor or a registered plain subclass), a Python number or None;
// * at least one of them requires grad (else it answers NotImplemented, as the reference does).
// Then, as the reference:
// 1. per argument, its edge `(grad_fn, output_nr)` (or `edge_of(t)` for leaves and views) and metadata
//    `(shape, dtype, device)` when it requires grad, `(None, 0)` and None when not, and the mask of
//    those that do;
// 2. the result: the op's checked CPU kernel's array wrapped in a new Tensor, or `run_without_grad`;
// 3. the node (new_node's steps): `object.__new__(cls)`, next_functions, _seq, _input_meta,
//    _needed (when not every argument needs a gradient), the saved values the formulas that will
//    run read (`plan`: tensors as SavedTensor, shape-only values as TensorMeta, numbers as they
//    are; anything else through the reference's `save_value`), and anomaly mode's forward trace;
// 4. the output (_attach's one-tensor case): `_requires_grad` and `_grad_fn` for a differentiable
//    dtype, and the saved output when a formula that will run reads it; any other result (views,
//    several outputs) goes to the reference's `_attach`.
// Saving a tensor inline (SavedTensor without __init__) is the reference's `SavedTensor._of_input`;
// while some saved_tensors_hooks context is open (`graph._hooks_open`), the reference saves it.
#include <pybind11/pybind11.h>

#include <cstdint>

namespace py = pybind11;

namespace {

// An interned str (attribute names: lookups then compare pointers, not characters).
py::str interned(const char* text) {
  PyObject* s = PyUnicode_InternFromString(text);
  if (s == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(s);
}

py::object get(PyObject* obj, PyObject* name) {
  PyObject* value = PyObject_GetAttr(obj, name);
  if (value == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(value);
}

void set(PyObject* obj, PyObject* name, PyObject* value) {
  if (PyObject_SetAttr(obj, name, value) < 0) throw py::error_already_set();
}

py::object call(const py::object& fn, std::initializer_list<PyObject*> args) {
  PyObject* result = PyObject_Vectorcall(fn.ptr(), const_cast<PyObject**>(args.begin()), args.size(), nullptr);
  if (result == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(result);
}

bool is_number(PyObject* v) {
  PyTypeObject* t = Py_TYPE(v);
  return t == &PyLong_Type || t == &PyFloat_Type || t == &PyBool_Type || t == &PyComplex_Type;
}

// Interned attribute names.
struct Names {
  py::str data = interned("_data"), device = interned("_device"), type = interned("type"),
          requires_grad = interned("_requires_grad"), grad_fn = interned("_grad_fn"),
          output_nr = interned("_output_nr"), view_info = interned("_view_info"), shape = interned("shape"),
          dtype = interned("dtype"), storage = interned("_storage"), version = interned("version"),
          next_functions = interned("next_functions"), seq = interned("_seq"), input_meta = interned("_input_meta"),
          needed = interned("_needed"), saved = interned("_saved"), saved_results = interned("_saved_results"),
          is_output = interned("_is_output"), tensor = interned("_tensor"), saved_version = interned("_version"),
          unpack = interned("_unpack"), enabled = interned("enabled"), cpu = interned("cpu"),
          strides = interned("_strides"), offset = interned("_offset"), node_ref = interned("_node_ref"), source = interned("_source"),
          storage_device = interned("device");
};

const Names& names() {
  static const Names* n = new Names();  // (never freed: the interpreter outlives it)
  return *n;
}

// What every recorder shares: ember-autograd's helpers and state (set once by `_record`).
struct Shared {
  py::object tensor_type;      // ember.Tensor
  py::object tensor_types;     // the set of plain tensor types (PLAIN_TENSOR_TYPES; may grow)
  py::object differentiable;   // the set of numpy dtypes that can require grad
  py::object sequence;         // graph._sequence: the nodes' creation counter
  py::object new_object;       // object.__new__
  py::object saved_tensor;     // graph.SavedTensor
  py::object graph_globals;    // graph's module dict (its `_hooks_open` count)
  py::object hooks_open_key;   // "_hooks_open"
  py::object anomaly_state;    // _anomaly._state
  py::object record_forward;   // _anomaly.record_forward(node)
  py::object edge_of;          // graph.edge_of(t)
  py::object tensor_meta;      // graph.tensor_meta(v)
  py::object save_input;       // SavedTensor._of_input (while hooks are open)
  py::object save_output;      // SavedTensor._of_output(result, node)
  py::object storage_type;     // ember._storage.Storage (to save an output inline; None: through save_output)
  py::object save_value;       // _record._save_value(v): any other saved value
  py::object run_without_grad; // _record.run_without_grad(op, args, kwargs, device)
  py::object attach;           // _record._attach(op, entry, node, result)
};

Shared* shared = nullptr;

class PositionalRecorder {
 public:
  PositionalRecorder(py::object reference, py::object op, py::object entry, py::object cls, py::tuple plan,
                     Py_ssize_t k, long long result_by, py::object checked, bool is_function)
      : reference_(std::move(reference)), op_(std::move(op)), entry_(std::move(entry)), cls_(std::move(cls)),
        plan_(std::move(plan)), k_(k), every_((1LL << k) - 1), result_by_(result_by), checked_(std::move(checked)),
        is_function_(is_function) {
    if (shared == nullptr) throw std::runtime_error("PositionalRecorder: init_recorder was not called");
    if (k_ < 1 || k_ > 62) throw std::invalid_argument("PositionalRecorder: k must be in [1, 62]");
  }

  py::object reference() const { return reference_; }

  py::object operator()(py::tuple args, py::object device) {
    const Names& n = names();
    Py_ssize_t count = PyTuple_GET_SIZE(args.ptr());
    if (count != k_) return call(reference_, {args.ptr(), device.ptr()});
    // 1. edges, metadata and mask (the reference's inlined _inputs loop)
    py::tuple edges(k_), meta(k_);
    long long mask = 0;
    for (Py_ssize_t i = 0; i < k_; ++i) {
      PyObject* v = PyTuple_GET_ITEM(args.ptr(), i);
      int plain = PySet_Contains(shared->tensor_types.ptr(), reinterpret_cast<PyObject*>(Py_TYPE(v)));
      if (plain < 0) throw py::error_already_set();
      if (plain && PyObject_IsTrue(get(v, n.requires_grad.ptr()).ptr())) {
        py::object fn = get(v, n.grad_fn.ptr());
        py::object edge;
        if (!fn.is_none() && get(v, n.view_info.ptr()).is_none()) {
          edge = py::make_tuple(fn, get(v, n.output_nr.ptr()));
        } else {
          edge = call(shared->edge_of, {v});
        }
        py::object data = get(v, n.data.ptr());
        PyTuple_SET_ITEM(edges.ptr(), i, edge.release().ptr());
        PyTuple_SET_ITEM(meta.ptr(), i,
                         py::make_tuple(get(data.ptr(), n.shape.ptr()), get(data.ptr(), n.dtype.ptr()),
                                        get(v, n.device.ptr()))
                             .release()
                             .ptr());
        mask |= 1LL << i;
      } else if (plain || is_number(v) || v == Py_None) {
        PyTuple_SET_ITEM(edges.ptr(), i, py::make_tuple(py::none(), 0).release().ptr());
        PyTuple_SET_ITEM(meta.ptr(), i, py::none().release().ptr());
      } else {
        return call(reference_, {args.ptr(), device.ptr()});  // (it answers NotImplemented for these)
      }
    }
    if (mask == 0) return py::reinterpret_borrow<py::object>(Py_NotImplemented);

    // 2. the result
    py::object result;
    if (!checked_.is_none() && get(device.ptr(), n.type.ptr()).equal(n.cpu)) {
      PyObject* array = PyObject_Call(checked_.ptr(), args.ptr(), nullptr);
      if (array == nullptr) throw py::error_already_set();
      if (array != Py_None) {
        result = call(shared->new_object, {shared->tensor_type.ptr()});
        set(result.ptr(), n.data.ptr(), array);
        set(result.ptr(), n.device.ptr(), device.ptr());
      }
      Py_DECREF(array);
    }
    if (!result) {
      py::dict no_kwargs;
      result = call(shared->run_without_grad, {op_.ptr(), args.ptr(), no_kwargs.ptr(), device.ptr()});
    }

    // 3. the node
    long long needed = mask == every_ ? -1 : mask;
    py::object node = new_node(args, edges, meta, needed);

    // 4. the output
    if (Py_TYPE(result.ptr()) == reinterpret_cast<PyTypeObject*>(shared->tensor_type.ptr()) && is_function_) {
      py::object dtype = get(get(result.ptr(), n.data.ptr()).ptr(), n.dtype.ptr());
      int differentiable = PySequence_Contains(shared->differentiable.ptr(), dtype.ptr());
      if (differentiable < 0) throw py::error_already_set();
      if (differentiable) {
        set(result.ptr(), n.requires_grad.ptr(), Py_True);
        set(result.ptr(), n.grad_fn.ptr(), node.ptr());
      }
      if (mask & result_by_) {
        py::object saved = save_output(result.ptr());
        if (!saved) saved = call(shared->save_output, {result.ptr(), node.ptr()});
        set(node.ptr(), n.saved_results.ptr(), py::make_tuple(saved).ptr());
      }
      return result;
    }
    return call(shared->attach, {op_.ptr(), entry_.ptr(), node.ptr(), result.ptr()});
  }

 private:
  // new_node's steps for a positional call of exactly k arguments (see _record.new_node).
  py::object new_node(const py::tuple& args, const py::tuple& edges, const py::tuple& meta, long long needed) {
    const Names& n = names();
    py::object node = call(shared->new_object, {cls_.ptr()});
    set(node.ptr(), n.next_functions.ptr(), edges.ptr());
    PyObject* seq = PyIter_Next(shared->sequence.ptr());
    if (seq == nullptr) throw py::error_already_set();
    set(node.ptr(), n.seq.ptr(), seq);
    Py_DECREF(seq);
    set(node.ptr(), n.input_meta.ptr(), meta.ptr());
    if (needed != -1) set(node.ptr(), n.needed.ptr(), py::int_(needed).ptr());
    Py_ssize_t planned = PyTuple_GET_SIZE(plan_.ptr());
    if (planned) {
      py::dict saved;
      set(node.ptr(), n.saved.ptr(), saved.ptr());
      for (Py_ssize_t j = 0; j < planned; ++j) {
        // (key, name, position, shape_only, readers, default)
        PyObject* item = PyTuple_GET_ITEM(plan_.ptr(), j);
        long long readers = PyLong_AsLongLong(PyTuple_GET_ITEM(item, 4));
        if (readers == -1 && PyErr_Occurred()) throw py::error_already_set();
        if (!(needed & readers)) continue;  // only formulas of arguments that need no gradient read it
        Py_ssize_t position = PyLong_AsSsize_t(PyTuple_GET_ITEM(item, 2));
        if (position == -1 && PyErr_Occurred()) throw py::error_already_set();
        PyObject* v = 0 <= position && position < k_ ? PyTuple_GET_ITEM(args.ptr(), position) : PyTuple_GET_ITEM(item, 5);
        py::object value = saved_value(v, PyObject_IsTrue(PyTuple_GET_ITEM(item, 3)));
        if (PyDict_SetItem(saved.ptr(), PyTuple_GET_ITEM(item, 0), value.ptr()) < 0) throw py::error_already_set();
      }
    }
    if (PyObject_IsTrue(get(shared->anomaly_state.ptr(), n.enabled.ptr()).ptr())) {
      call(shared->record_forward, {node.ptr()});
    }
    return node;
  }

  // What the node keeps of one saved value (new_node's loop body).
  py::object saved_value(PyObject* v, bool shape_only) {
    if (shape_only) return call(shared->tensor_meta, {v});
    if (is_number(v) || v == Py_None) return py::reinterpret_borrow<py::object>(v);
    int plain = PySet_Contains(shared->tensor_types.ptr(), reinterpret_cast<PyObject*>(Py_TYPE(v)));
    if (plain < 0) throw py::error_already_set();
    if (!plain) return call(shared->save_value, {v});
    PyObject* open = PyDict_GetItemWithError(shared->graph_globals.ptr(), shared->hooks_open_key.ptr());
    if (open == nullptr && PyErr_Occurred()) throw py::error_already_set();
    if (open != nullptr && PyObject_IsTrue(open)) return call(shared->save_input, {v});
    // SavedTensor._of_input, inline
    const Names& n = names();
    py::object saved = call(shared->new_object, {shared->saved_tensor.ptr()});
    set(saved.ptr(), n.is_output.ptr(), Py_False);
    py::object storage = get(v, n.storage.ptr());
    if (storage.is_none()) {
      set(saved.ptr(), n.saved_version.ptr(), py::int_(0).ptr());
    } else {
      set(saved.ptr(), n.saved_version.ptr(), get(storage.ptr(), n.version.ptr()).ptr());
    }
    set(saved.ptr(), n.tensor.ptr(), v);
    set(saved.ptr(), n.unpack.ptr(), Py_None);
    return saved;
  }

  // SavedTensor._of_output(result, node), inline for its common case: no saved_tensors_hooks open and a
  // result with no cached strides or offset (not a view); its storage is built when it has none, as
  // storage_of does. The node is not referenced (unpack receives it). Otherwise: an empty object, and the
  // caller goes to the reference.
  py::object save_output(PyObject* result) {
    const Names& n = names();
    if (shared->storage_type.is_none() || hooks_open() || !get(result, n.strides.ptr()).is_none() ||
        !get(result, n.offset.ptr()).is_none()) {
      return py::object();
    }
    py::object storage = get(result, n.storage.ptr());
    py::object data = get(result, n.data.ptr());
    py::object device = get(result, n.device.ptr());
    if (storage.is_none()) {  // storage_of(result): Storage._of_array(result._data, result._device)
      storage = call(shared->new_object, {shared->storage_type.ptr()});
      set(storage.ptr(), n.source.ptr(), data.ptr());
      set(storage.ptr(), n.storage_device.ptr(), device.ptr());
      set(storage.ptr(), n.version.ptr(), py::int_(0).ptr());
      set(result, n.storage.ptr(), storage.ptr());
    }
    py::object alias = call(shared->new_object, {shared->tensor_type.ptr()});
    set(alias.ptr(), n.data.ptr(), data.ptr());
    set(alias.ptr(), n.device.ptr(), device.ptr());
    set(alias.ptr(), n.storage.ptr(), storage.ptr());
    py::object saved = call(shared->new_object, {shared->saved_tensor.ptr()});
    set(saved.ptr(), n.is_output.ptr(), Py_True);
    set(saved.ptr(), n.output_nr.ptr(), py::int_(0).ptr());
    set(saved.ptr(), n.requires_grad.ptr(), get(result, n.requires_grad.ptr()).ptr());
    set(saved.ptr(), n.node_ref.ptr(), Py_None);
    set(saved.ptr(), n.tensor.ptr(), alias.ptr());
    set(saved.ptr(), n.saved_version.ptr(), get(storage.ptr(), n.version.ptr()).ptr());
    set(saved.ptr(), n.unpack.ptr(), Py_None);
    return saved;
  }

  static bool hooks_open() {
    PyObject* open = PyDict_GetItemWithError(shared->graph_globals.ptr(), shared->hooks_open_key.ptr());
    if (open == nullptr && PyErr_Occurred()) throw py::error_already_set();
    int r = open == nullptr ? 0 : PyObject_IsTrue(open);
    if (r < 0) throw py::error_already_set();
    return r != 0;
  }

  py::object reference_, op_, entry_, cls_;
  py::tuple plan_;
  Py_ssize_t k_;
  long long every_, result_by_;
  py::object checked_;
  bool is_function_;
};

void init_recorder(py::dict helpers) {
  auto* s = new Shared();  // (lives as long as the interpreter; a second call replaces it)
  auto take = [&](const char* key) { return py::reinterpret_borrow<py::object>(helpers[key]); };
  s->tensor_type = take("tensor_type");
  s->tensor_types = take("tensor_types");
  s->differentiable = take("differentiable");
  s->sequence = take("sequence");
  s->new_object = take("new_object");
  s->saved_tensor = take("saved_tensor");
  s->graph_globals = take("graph_globals");
  s->hooks_open_key = interned("_hooks_open");
  s->anomaly_state = take("anomaly_state");
  s->record_forward = take("record_forward");
  s->edge_of = take("edge_of");
  s->tensor_meta = take("tensor_meta");
  s->save_input = take("save_input");
  s->save_output = take("save_output");
  s->storage_type = helpers.contains("storage_type") ? take("storage_type") : py::none();
  s->save_value = take("save_value");
  s->run_without_grad = take("run_without_grad");
  s->attach = take("attach");
  if (!PySet_Check(s->tensor_types.ptr())) throw py::type_error("init_recorder: tensor_types must be a set");
  if (!PyDict_Check(s->graph_globals.ptr())) throw py::type_error("init_recorder: graph_globals must be a dict");
  shared = s;
}

}  // namespace

void init_record(py::module_& m) {
  m.def("init_recorder", &init_recorder, py::arg("helpers"),
        "Give the positional recorders ember-autograd's helpers (csrc/record.cpp lists them).");
  py::class_<PositionalRecorder>(m, "PositionalRecorder",
                                 "ember-autograd's positional recorder for its common calls (csrc/record.cpp).")
      .def(py::init<py::object, py::object, py::object, py::object, py::tuple, Py_ssize_t, long long, py::object,
                    bool>(),
           py::arg("reference"), py::arg("op"), py::arg("entry"), py::arg("cls"), py::arg("plan"), py::arg("k"),
           py::arg("result_by"), py::arg("checked"), py::arg("is_function"))
      .def("__call__", &PositionalRecorder::operator(), py::arg("args"), py::arg("device"))
      .def_property_readonly("reference", &PositionalRecorder::reference);
}
