// ember._C.run_graph: the loop of ember-autograd's backward engine (ember/autograd/_engine.py,
// _GraphTask.run), for the common task: no inputs= to capture, no anomaly mode, no profiler.
//
// The Python loop is the reference and stays: the engine takes this one when the task allows it,
// and ember-autograd's tests run graphs both ways and compare (tests/test_engine_native.py). Per
// node of a small op's graph the Python loop's bookkeeping (dependency counts, the ready heap, the
// gradient buffers, the calls of apply and _release) cost about as much as the node's formula;
// here it is a few hash-map operations. What the nodes compute is unchanged: apply, _release and
// the gradient sums (`a + b`, through the dispatcher) are the same Python calls, made from here.
//
// The algorithm, step for step as the Python loop:
// 1. walk the graph from the roots, counting the edges into each node (its dependencies);
// 2. run the ready node of the highest sequence number (the most recently created) first, ties in
//    the order the nodes became ready (a leaf's AccumulateGrad has an infinite number);
// 3. a node runs when all its dependencies have run: a plain node (no hooks, ember's own formulas, or
//    any node while numpy's error state is the user's) is `node.apply(grads)` then `node._release()`
//    (unless retain_graph), both in one call when both run: `node._apply_release(grads)` (with grads
//    None it only releases); every other node (a leaf's AccumulateGrad, a node with hooks, a custom
//    Function's backward) is handed back to Python, `other(node, grads)`, which returns its input
//    gradients, or None for an AccumulateGrad;
// 4. each input gradient is added into its child's buffer (one slot per output of the child),
//    summing with `+` where several edges meet.
// A node that received no gradient at all runs with grads None: plain nodes then skip apply (their
// inputs get no gradient), `other` decides for the rest.
//
// References: every node met in the walk is held (strongly) until the task ends, as the Python
// loop's dicts hold them; buffers are owned lists. Errors raised by Python code propagate as they
// are (pybind11's error_already_set) after the C++ state is released.
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cstdint>
#include <queue>
#include <unordered_map>
#include <vector>

#include "dispatch.h"  // the dispatcher's hot path: compiled here, with the other per-op hot paths
#include "pointwise_fast.h"  // the pointwise ops' checked kernels' common call

namespace py = pybind11;

namespace {

// An interned str (attribute names: lookups then compare pointers, not characters).
py::str interned(const char* text) {
  PyObject* s = PyUnicode_InternFromString(text);
  if (s == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(s);
}

struct NodeState {
  Py_ssize_t dependencies = 0;  // edges into the node whose source has not run yet
  py::object buffer;            // the gradients of the node's outputs (a list), or none yet
};

struct Ready {
  double seq;       // the node's sequence number: higher runs first
  uint64_t tie;     // then the order it became ready
  PyObject* node;   // borrowed: `states` holds it
};

struct RunsLater {
  bool operator()(const Ready& a, const Ready& b) const {
    return a.seq < b.seq || (a.seq == b.seq && a.tie > b.tie);
  }
};

// Attribute names, interned once.
struct Names {
  py::str next_functions = interned("next_functions"), num_outputs = interned("_num_outputs"),
          seq = interned("_seq"), any_hooks = interned("_any_hooks"), runs_ember_code = interned("_runs_ember_code"),
          apply = interned("apply"), release = interned("_release"), apply_release = interned("_apply_release");
};

py::object attr(PyObject* obj, const py::str& name) {
  PyObject* value = PyObject_GetAttr(obj, name.ptr());
  if (value == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(value);
}

bool truthy(const py::object& value) {
  int r = PyObject_IsTrue(value.ptr());
  if (r < 0) throw py::error_already_set();
  return r != 0;
}

double sequence_number(PyObject* node, const Names& names) {
  py::object seq = attr(node, names.seq);
  double value = PyFloat_AsDouble(seq.ptr());
  if (value == -1.0 && PyErr_Occurred()) throw py::error_already_set();
  return value;
}

// The child and output number of one edge `(node or None, output_nr)` of next_functions.
bool edge(PyObject* item, PyObject** child, Py_ssize_t* nr) {
  if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2)
    throw py::type_error("run_graph: an edge of next_functions is not a (node, output_nr) pair");
  *child = PyTuple_GET_ITEM(item, 0);
  if (*child == Py_None) return false;
  *nr = PyLong_AsSsize_t(PyTuple_GET_ITEM(item, 1));
  if (*nr == -1 && PyErr_Occurred()) throw py::error_already_set();
  return true;
}

// next_functions as a tuple (nodes set it as one; anything else is converted).
py::tuple edges_of(PyObject* node, const Names& names) {
  py::object value = attr(node, names.next_functions);
  if (PyTuple_Check(value.ptr())) return py::reinterpret_borrow<py::tuple>(value);
  return py::tuple(value);
}

// Step 1: the dependency count of every node reachable from the roots.
void count_dependencies(const py::list& roots, std::unordered_map<PyObject*, NodeState>& states,
                        std::vector<py::object>& held, const Names& names) {
  std::vector<PyObject*> stack;
  for (py::handle root : roots) {
    if (states.emplace(root.ptr(), NodeState{}).second) {
      held.push_back(py::reinterpret_borrow<py::object>(root));
      stack.push_back(root.ptr());
    }
  }
  while (!stack.empty()) {
    PyObject* node = stack.back();
    stack.pop_back();
    py::tuple edges = edges_of(node, names);
    for (py::handle item : edges) {
      PyObject* child;
      Py_ssize_t nr;
      if (!edge(item.ptr(), &child, &nr)) continue;
      auto found = states.find(child);
      if (found == states.end()) {
        states.emplace(child, NodeState{1, py::object()});
        held.push_back(py::reinterpret_borrow<py::object>(child));
        stack.push_back(child);
      } else {
        found->second.dependencies += 1;
      }
    }
  }
}

// Add gradient `g` into slot `nr` of `child`'s buffer (created on first use).
void add_to_buffer(NodeState& state, PyObject* child, Py_ssize_t nr, PyObject* g, const Names& names) {
  if (!state.buffer) {
    Py_ssize_t outputs = PyLong_AsSsize_t(attr(child, names.num_outputs).ptr());
    if (outputs == -1 && PyErr_Occurred()) throw py::error_already_set();
    py::list slots(outputs);
    for (Py_ssize_t i = 0; i < outputs; ++i) PyList_SET_ITEM(slots.ptr(), i, Py_NewRef(Py_None));
    state.buffer = std::move(slots);
  }
  PyObject* slots = state.buffer.ptr();
  if (nr < 0 || nr >= PyList_GET_SIZE(slots)) throw py::index_error("run_graph: an edge's output_nr is out of range");
  PyObject* current = PyList_GET_ITEM(slots, nr);
  if (current == Py_None) {
    PyList_SetItem(slots, nr, Py_NewRef(g));
    return;
  }
  PyObject* sum = PyNumber_Add(current, g);
  if (sum == nullptr) throw py::error_already_set();
  PyList_SetItem(slots, nr, sum);  // steals sum, releases current
}

// Steps 2 to 4 (see the top of the file).
void run_graph(py::list roots, py::dict buffers, bool release, bool quiet, py::object other,
               py::object accumulate_grad) {
  static const Names& names = *new Names();  // (never freed: no str released after the interpreter ends)
  std::unordered_map<PyObject*, NodeState> states;
  std::vector<py::object> held;  // strong references to every node in `states`
  count_dependencies(roots, states, held, names);
  for (auto item : buffers) {
    auto found = states.find(item.first.ptr());
    if (found == states.end()) throw py::value_error("run_graph: a buffer's node is not among the roots");
    found->second.buffer = py::reinterpret_borrow<py::object>(item.second);
  }

  std::priority_queue<Ready, std::vector<Ready>, RunsLater> ready;
  uint64_t tie = 0;
  for (py::handle root : roots) {
    NodeState& state = states[root.ptr()];
    if (state.dependencies == 0) {
      state.dependencies = -1;  // pushed (a root listed twice is pushed once)
      ready.push(Ready{sequence_number(root.ptr(), names), tie++, root.ptr()});
    }
  }
  PyTypeObject* accumulate_type = reinterpret_cast<PyTypeObject*>(accumulate_grad.ptr());

  while (!ready.empty()) {
    PyObject* node = ready.top().node;
    ready.pop();
    py::object grads = std::move(states[node].buffer);  // leaves the buffer empty
    py::object out;
    bool plain = Py_TYPE(node) != accumulate_type && !truthy(attr(node, names.any_hooks)) &&
                 (!quiet || truthy(attr(node, names.runs_ember_code)));
    if (plain && release) {  // apply and _release in one call (one Python frame less per node)
      PyObject* result =
          PyObject_CallMethodOneArg(node, names.apply_release.ptr(), grads ? grads.ptr() : Py_None);
      if (result == nullptr) throw py::error_already_set();
      out = py::reinterpret_steal<py::object>(result);
      if (!grads) out = py::object();  // (it returns None: nothing was applied)
    } else if (plain) {
      if (grads) {
        PyObject* result = PyObject_CallMethodOneArg(node, names.apply.ptr(), grads.ptr());
        if (result == nullptr) throw py::error_already_set();
        out = py::reinterpret_steal<py::object>(result);
      }
    } else {
      out = other(py::handle(node), grads ? grads : py::none());
      if (out.is_none()) continue;  // a leaf's AccumulateGrad: nothing flows further
    }

    py::tuple edges = edges_of(node, names);
    py::object sequence;  // `out` as a list or tuple (zip(next_functions, out) in the Python loop)
    Py_ssize_t count = PyTuple_GET_SIZE(edges.ptr());
    if (out) {
      PyObject* fast = PySequence_Fast(out.ptr(), "run_graph: a node's apply must return a sequence");
      if (fast == nullptr) throw py::error_already_set();
      sequence = py::reinterpret_steal<py::object>(fast);
      count = std::min(count, PySequence_Fast_GET_SIZE(fast));
    }
    for (Py_ssize_t i = 0; i < count; ++i) {
      PyObject* child;
      Py_ssize_t nr;
      if (!edge(PyTuple_GET_ITEM(edges.ptr(), i), &child, &nr)) continue;
      auto found = states.find(child);
      if (found == states.end()) continue;
      NodeState& state = found->second;
      PyObject* g = sequence ? PySequence_Fast_GET_ITEM(sequence.ptr(), i) : Py_None;
      if (g != Py_None) add_to_buffer(state, child, nr, g, names);
      if (--state.dependencies == 0) {
        state.dependencies = -1;
        ready.push(Ready{sequence_number(child, names), tie++, child});
      }
    }
  }
}

}  // namespace

void init_engine(py::module_& m) {
  m.def("make_dispatch", &ember_dispatch::make_dispatch, py::arg("helpers"),
        "The dispatcher's positional hot path as a builtin dispatch(op, args, kwargs) (csrc/dispatch.h).");
  m.def("make_unary_fast", &ember_pointwise_fast::make_unary, py::arg("helpers"),
        "A unary op's checked CPU kernel with its common call in C (csrc/pointwise_fast.h).");
  m.def("make_binary_fast", &ember_pointwise_fast::make_binary, py::arg("helpers"),
        "BinaryRule.direct with its common call in C (csrc/pointwise_fast.h).");
  m.def("run_graph", &run_graph, py::arg("roots"), py::arg("buffers"), py::arg("release"), py::arg("quiet"),
        py::arg("other"), py::arg("accumulate_grad"),
        "The backward engine's loop for a task without capture, anomaly mode or profiler "
        "(ember/autograd/_engine.py describes it; csrc/engine.cpp the details).");
}
