"""The backward engine: run the graph from the outputs' gradients to the leaves.

One call of :func:`run_backward` is one *graph task*:

1. from the root edges, walk the graph (iteratively, so graphs of any depth
   work) counting for each node how many edges lead into it; with
   ``inputs``, keep only the nodes from which an input can be reached;
2. run nodes whose dependencies are all done, the most recently created
   first (as PyTorch's CPU engine orders them), summing the gradients that
   reach each node's outputs in a buffer;
3. at a leaf's :class:`~ember.autograd.graph.AccumulateGrad`, add into
   ``.grad`` (``backward``) or capture the gradient (``grad``).

The engine keeps no global state, so a node's backward may itself call
``backward`` or ``grad`` (reentrant backward, as checkpointing does). The
one thing it records per thread is whether the running tasks all accumulate
into every leaf (no ``inputs``, not :func:`ember.autograd.grad`): reentrant
checkpointing needs that (:func:`is_checkpoint_valid`).

Two loops run step 2: the compiled one (``ember._C.run_graph``, csrc/engine.cpp) for
tasks without ``inputs``, anomaly mode or profiler, and :meth:`_GraphTask._run_python`,
its reference, for every other task. Both run the common node (no hooks, ember's own
formulas) themselves and hand every other node (a leaf's ``AccumulateGrad``, nodes
with hooks, custom ``Function`` backwards) to :meth:`_GraphTask._other`.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import threading

import numpy as np

import ember
from ember._hooks import check_hook_result, check_hook_results, hook_name
from ember._ops._dispatch import ops_intercepted, state
from ember._ops._float_errors import as_user, enter_quiet, exit_quiet
from ember._tensor import Tensor

from . import _anomaly
from .graph import AccumulateGrad, edge_of

try:  # the engine's loop in C++ (csrc/engine.cpp); a build of ember-core without it runs _run_python
    from ember._C import run_graph as _native_run
except ImportError:
    _native_run = None

__all__ = ["run_backward", "is_checkpoint_valid"]


class _ThreadState(threading.local):
    def __init__(self):
        self.checkpoint_valid = True


_thread_state = _ThreadState()

#: Set by ember.profiler while it records (``ember.autograd.profiler`` installs it): ``node_observer(node)``
#: opens the span of a backward node and returns the callable that closes it. Read once per backward.
node_observer = None


@contextlib.contextmanager
def python_loop():
    """Within the block (in every thread), backward tasks run the engine's Python loop, the reference of the
    compiled one: for tests that run graphs both ways."""
    global _native_run
    native = _native_run
    _native_run = None
    try:
        yield
    finally:
        _native_run = native


def is_checkpoint_valid():
    """Whether a backward running now (in this thread) accumulates into every leaf.

    False inside :func:`ember.autograd.grad` and ``backward(inputs=...)``: a reentrant
    checkpoint's inner backward could not deliver its gradients to those (PyTorch's
    ``torch.autograd._is_checkpoint_valid``). True outside any backward.
    """
    return _thread_state.checkpoint_valid


def run_backward(
    tensors,
    grad_tensors,
    *,
    retain_graph,
    create_graph,
    inputs=None,
    accumulate=True,
    allow_unused=False,
):
    """Backpropagate from ``tensors``; accumulate into leaves or return the gradients of ``inputs``.

    Args:
        tensors (sequence[Tensor]): the roots.
        grad_tensors (sequence[Tensor or None]): their gradients (None: ones, scalar roots only).
        retain_graph (bool): keep saved tensors for another backward.
        create_graph (bool): record the backward computation (higher-order gradients).
        inputs (sequence[Tensor], optional): restrict to these tensors.
        accumulate (bool): add into ``.grad`` (backward) or return the gradients (grad).
        allow_unused (bool): with ``accumulate=False``, return None for inputs the roots do not depend on.

    Returns:
        tuple[Tensor or None] with ``accumulate=False``, else None.

    Raises:
        RuntimeError: a root does not require grad, a gradient's shape does not match, an input
            is unused and ``allow_unused`` is False, or the graph was freed.
    """
    roots = []
    for i, (t, g) in enumerate(zip(tensors, grad_tensors)):
        if not t._requires_grad:
            raise RuntimeError(f"element {i} of tensors does not require grad and does not have a grad_fn")
        roots.append((edge_of(t), _root_grad(t, g, i)))
    input_edges = None
    if inputs is not None:
        input_edges = []
        for i, t in enumerate(inputs):
            if not isinstance(t, Tensor):
                raise TypeError(f"inputs[{i}] must be a Tensor, got {type(t).__name__}")
            if not t._requires_grad:
                raise RuntimeError(f"One of the differentiated Tensors (inputs[{i}]) does not require grad")
            input_edges.append(edge_of(t))
    task = _GraphTask(roots, input_edges, retain_graph, create_graph, accumulate)
    previous = state.grad_enabled
    previous_valid = _thread_state.checkpoint_valid
    state.grad_enabled = create_graph
    _thread_state.checkpoint_valid = previous_valid and input_edges is None
    # numpy's floating-point errors are ignored once for the whole task rather than around every kernel
    # (a few percent of a small op); the user's code that runs inside goes through as_user (see _float_errors).
    # Not under a dispatch mode: the formulas' ops would run the mode's (user) code.
    quiet = enter_quiet() if not ops_intercepted() else None
    try:
        task.quiet = quiet is not None
        task.run()
    finally:
        exit_quiet(quiet)
        state.grad_enabled = previous
        _thread_state.checkpoint_valid = previous_valid
    if accumulate:
        if inputs is not None:  # non-leaf inputs of backward(inputs=...) get .grad too
            for t, edge in zip(inputs, input_edges):
                g = task.captured.get(edge)
                if g is not None and type(edge[0]) is not AccumulateGrad:
                    t._grad = g.detach() if t._grad is None else t._grad + g.detach()
        return None
    results = []
    for i, edge in enumerate(input_edges):
        g = task.captured.get(edge)
        if g is None and not allow_unused:
            raise RuntimeError(
                f"The differentiated Tensor at index {i} appears to not have been used in the graph. "
                "Set allow_unused=True if this is the desired behavior."
            )
        results.append(g)
    return tuple(results)


def _root_grad(t, g, index):
    if g is None:
        if t.numel() != 1:
            raise RuntimeError("grad can be implicitly created only for scalar outputs")
        if not t.is_floating_point():
            raise RuntimeError(f"grad can be implicitly created only for real scalar outputs but got {t.dtype}")
        if type(t) is Tensor and not ops_intercepted():
            # ones_like(t), without its trip through the dispatcher: a fixed cost of every backward()
            device = t._device
            if device.type == "cpu":
                return Tensor._make(np.ones(t._data.shape, t._data.dtype), device)
            if device.type == "cuda":
                from ember.cuda._backend import scalar_one

                return Tensor._make(scalar_one(t._data), device)
        return ember.ones_like(t)
    if not isinstance(g, Tensor):
        g = ember.tensor(g, dtype=t.dtype, device=t.device)
    if tuple(g.shape) != tuple(t.shape):
        raise RuntimeError(
            f"Mismatch in shape: grad_output[{index}] has a shape of {g.shape} and output[{index}] has a shape "
            f"of {t.shape}."
        )
    if g.is_complex() != t.is_complex():
        raise RuntimeError(
            f"For complex Tensors, both grad_output and output are required to have the same dtype. Mismatch in "
            f"dtype: grad_output[{index}] has a dtype of {g.dtype} and output[{index}] has a dtype of {t.dtype}."
        )
    return _Shared(g)


class _Shared:
    """Marks a gradient that someone else holds (the caller's ``grad_tensors``): copy before storing it."""

    __slots__ = ("tensor",)

    def __init__(self, tensor):
        self.tensor = tensor


class _GraphTask:
    def __init__(self, roots, input_edges, retain_graph, create_graph, accumulate):
        self.roots = roots
        self.retain_graph = retain_graph
        self.create_graph = create_graph
        self.accumulate = accumulate
        self.input_edges = input_edges
        self.captured = {}
        self.stored = set()  # ids of tensors stored into a .grad by this task
        self.shared = set()  # ids of tensors the caller holds
        self.quiet = False  # whether numpy's error state is ember's ignore-all (run user code through as_user)

    def run(self):
        buffers = {}
        for (node, nr), g in self.roots:
            if type(g) is _Shared:
                self.shared.add(id(g.tensor))
                g = g.tensor
            _add_to_buffer(buffers, node, nr, g)
        roots = list(dict.fromkeys(n for (n, _), _ in self.roots))  # (first-seen order: ties run in it)
        if self.input_edges is None and not _anomaly._state.enabled and node_observer is None and _native_run:
            # the common task: the compiled loop (csrc/engine.cpp), which hands special nodes back to _other
            _native_run(roots, buffers, not self.retain_graph, self.quiet, self._other, AccumulateGrad)
            return
        self._run_python(roots, buffers)

    def _run_python(self, roots, buffers):
        """The engine's loop in Python: the reference of csrc/engine.cpp, and the loop of every task that
        captures ``inputs``, runs under anomaly mode or the profiler."""
        capture_at = None
        if self.input_edges is not None:
            capture_at = {}
            for node, nr in self.input_edges:
                capture_at.setdefault(node, set()).add(nr)
        dependencies = self._dependencies(roots, capture_at)
        ready = []
        tie = itertools.count()
        for node in roots:
            if dependencies.get(node, 0) == 0:
                heapq.heappush(ready, (-node._seq, next(tie), node))
        pop, push = heapq.heappop, heapq.heappush
        observer = node_observer  # the profiler's, while it records: nodes then take the general branch
        plain = capture_at is None and not _anomaly._state.enabled and observer is None
        release = not self.retain_graph
        quiet = self.quiet
        node = None
        grads = None
        while ready or node is not None:
            if node is None:
                node = pop(ready)[2]
                grads = buffers.pop(node, None)
            # else: node is the one child the previous node made ready, and grads its gradients
            if plain and type(node) is not AccumulateGrad and not node._any_hooks and (
                node._runs_ember_code or not quiet
            ):
                # the common case, inlined: no hooks, no capture, no anomaly checks, no user code
                out = _nones(node) if grads is None else node.apply(grads)
                if release:
                    node._release()
            else:
                out = self._other(node, grads, capture_at, observer)
                if out is None:  # an AccumulateGrad
                    node = None
                    continue
            became_ready = None  # the last child made ready here, and its gradients (not in buffers)
            ready_grads = None
            for (child, nr), g in zip(node.next_functions, out):
                if child is None:
                    continue
                left = dependencies.get(child)
                if left is None:
                    continue
                if left == 1:  # the child's last edge: its gradients leave the buffers
                    dependencies[child] = 0
                    slot = buffers.pop(child, None)
                    if g is not None:
                        if slot is None:
                            slot = [None] * child._num_outputs
                        current = slot[nr]
                        slot[nr] = g if current is None else current + g
                    if became_ready is not None:
                        if ready_grads is not None:
                            buffers[became_ready] = ready_grads
                        push(ready, (-became_ready._seq, next(tie), became_ready))
                    became_ready, ready_grads = child, slot
                    continue
                if g is not None:
                    slot = buffers.get(child)
                    if slot is None:
                        slot = buffers[child] = [None] * child._num_outputs
                    current = slot[nr]
                    slot[nr] = g if current is None else current + g
                dependencies[child] = left - 1
            # A chain: the only node that became ready, with nothing else waiting, runs next without
            # going through the heap or the buffers (the order is the same either way).
            if became_ready is not None and not ready:
                node, grads = became_ready, ready_grads
            else:
                if became_ready is not None:
                    if ready_grads is not None:
                        buffers[became_ready] = ready_grads
                    push(ready, (-became_ready._seq, next(tie), became_ready))
                node = None

    def _dependencies(self, roots, capture_at):
        """Number of edges into each node that must run; with ``capture_at``, only nodes leading to an input."""
        if capture_at is None:
            # backward() without inputs=: every reachable node runs; count the edges in one walk
            self._stop = set()
            dependencies = dict.fromkeys(roots, 0)
            count_of = dependencies.get
            stack = list(roots)
            while stack:
                for child, _ in stack.pop().next_functions:
                    if child is None:
                        continue
                    count = count_of(child)
                    if count is None:
                        dependencies[child] = 1
                        stack.append(child)
                    else:
                        dependencies[child] = count + 1
            return dependencies
        children = {}
        order = []
        stack = list(roots)
        seen = set(roots)
        while stack:
            node = stack.pop()
            order.append(node)
            kids = [c for c, _ in node.next_functions if c is not None]
            children[node] = kids
            for c in kids:
                if c not in seen:
                    seen.add(c)
                    stack.append(c)
        if capture_at is not None:
            # nodes from which an input is reachable: walk the reversed edges from the inputs
            # (linear in the graph's size; a fixed-point sweep would be quadratic on long chains)
            parents = {}
            for node in order:
                for c in children[node]:
                    parents.setdefault(c, []).append(node)
            needed = set(capture_at).intersection(seen)
            stack = list(needed)
            while stack:
                for parent in parents.get(stack.pop(), ()):
                    if parent not in needed:
                        needed.add(parent)
                        stack.append(parent)
            keep = needed
        else:
            keep = seen
        dependencies = {node: 0 for node in keep}
        for node in keep:
            for c in children[node]:
                if c in keep:
                    dependencies[c] += 1
        # an input's node with no other input beyond it: capture there, do not run it
        self._stop = (
            set()
            if capture_at is None
            else {n for n in capture_at if n in children and not any(c in keep for c in children[n])}
        )
        return dependencies

    def _other(self, node, grads, capture_at=None, observer=None):
        """Run a node that is not the common case: a leaf's AccumulateGrad (returns None), a node with hooks
        or a custom Function's backward (the user's code), or any node of a task that captures ``inputs``
        or runs under anomaly mode or the profiler. Both loops (Python's and csrc/engine.cpp's) call it."""
        quiet = self.quiet
        if type(node) is AccumulateGrad:
            if grads is not None:
                if quiet and (type(grads[0]) is not Tensor or _has_leaf_hooks(node.variable)):
                    # leaf hooks, and a subclass's overrides, are the user's code
                    as_user(self._accumulate, node, grads[0], capture_at)
                else:
                    self._accumulate(node, grads[0], capture_at)
            return None
        if grads is None:
            grads = [None] * node._num_outputs
        close = observer(node) if observer is not None else None
        if quiet:  # hooks are the user's code (and the node's kernels then quiet themselves)
            out = as_user(self._run_node, node, grads, capture_at)
        else:
            out = self._run_node(node, grads, capture_at)
        if close is not None:
            close()
        return out

    def _run_node(self, node, grads, capture_at):
        if node._tensor_pre_hooks is not None or node._retain_grad_hooks is not None:
            grads = _call_tensor_prehooks(node, grads)
        if capture_at is not None and node in capture_at:
            for nr in capture_at[node]:
                if grads[nr] is not None:
                    self.captured[(node, nr)] = grads[nr]
            if node in self._stop:
                return ()
        if node._pre_hooks:
            for hook in tuple(node._pre_hooks.values()):
                new = hook(tuple(grads))
                if new is not None:
                    grads = check_hook_results(hook, grads, new)
        if any(g is not None for g in grads):
            try:
                out = node.apply(grads)
            except Exception:
                _anomaly.warn_forward_trace(node)
                raise
        else:
            out = _nones(node)
        if node._hooks:
            for hook in tuple(node._hooks.values()):
                new = hook(tuple(out), tuple(grads))
                if new is not None:
                    out = check_hook_results(hook, out, new)
        if _anomaly._state.enabled:
            _anomaly.check_nan(node, out)
        if not self.retain_graph:
            node._release()
        return out

    def _accumulate(self, node, g, capture_at):
        variable = node.variable
        if g is None:
            return
        hooks = variable.__dict__.get("_leaf_hooks")
        if hooks:
            for hook in tuple(hooks.values()):
                new = hook(g)
                if new is not None:
                    g = check_hook_result(hook, g, new)
        if capture_at is not None:
            if node in capture_at:
                self.captured[(node, 0)] = g
            if not self.accumulate or node not in capture_at:
                return
        self._add_into_grad(variable, g)
        post = variable.__dict__.get("_post_accumulate_hooks")
        if post:
            for hook in tuple(post.values()):
                if hook(variable) is not None:
                    raise RuntimeError(
                        f"Tensor post accumulate grad hooks should return None (hook '{hook_name(hook)}' returned "
                        "a value)"
                    )

    def _add_into_grad(self, variable, g):
        if not self.create_graph and g._requires_grad:
            g = g.detach()
        current = variable._grad
        if current is None:
            if id(g) in self.shared or id(g) in self.stored or g._base is not None or not _c_contiguous(g):
                g = g.clone() if self.create_graph else ember.clone(g)
            self.stored.add(id(g))
            variable._grad = g
        elif self.create_graph:
            variable._grad = current + g
        else:
            # in place even when .grad is itself a graph (an earlier create_graph backward), as
            # PyTorch's AccumulateGrad does with grad mode off: .grad stays the same object
            current.add_(g)


def _has_leaf_hooks(variable):
    """Whether accumulating into leaf ``variable`` runs hooks (the user's code)."""
    hooks = variable.__dict__
    return bool(hooks.get("_leaf_hooks") or hooks.get("_post_accumulate_hooks"))


def _c_contiguous(t):
    """``t.is_contiguous()`` for a tensor that is not a view, from its array's flags (numpy's and CuPy's
    C-contiguity also ignores size-1 dims); the strides walk for anything else."""
    data = t._data
    if type(data) is np.ndarray or t._device.type == "cuda":
        return data.flags.c_contiguous
    return t.is_contiguous()


def _nones(node):
    return [None] * len(node.next_functions)


def _call_tensor_prehooks(node, grads):
    hooks = node._tensor_pre_hooks
    retain = node._retain_grad_hooks
    if hooks is None and retain is None:
        return grads
    grads = list(grads)
    if hooks:
        for nr, per_output in hooks.items():
            for hook in tuple(per_output.values()):
                if grads[nr] is None:
                    continue
                new = hook(grads[nr])
                if new is not None:
                    grads[nr] = check_hook_result(hook, grads[nr], new)
    if retain:
        for nr, fn in retain.items():
            if grads[nr] is not None:
                fn(grads[nr])
    return grads


def _add_to_buffer(buffers, node, nr, g):
    """Add ``g`` to the gradient of output ``nr`` of ``node`` (the sum over every edge into it)."""
    slot = buffers.get(node)
    if slot is None:
        slot = buffers[node] = [None] * node._num_outputs
    current = slot[nr]
    slot[nr] = g if current is None else current + g
