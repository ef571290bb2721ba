"""Fusion, kernel order and buffer reuse over the loop IR.

Three passes, each decision logged (logger ``ember._inductor.scheduler`` at debug level) with the
rule's name and its reason:

1. **Inlining** (vertical fusion). A pointwise buffer is substituted into the bodies that load it
   (its index symbols replaced by the load's index) when nothing needs it in memory (not a graph
   output, not an extern call's input) and either
   ``inline_single_use`` - it is loaded once, or
   ``inline_cheap`` - duplicating its body costs little (ops x loads <= :data:`INLINE_BUDGET`, and
   a broadcast read does not recompute more than :data:`BROADCAST_OPS` ops per element).
   Reductions get their pointwise prologue this way (producers inlined into the reduction body).
2. **Grouping** into kernels. Buffers left are visited in program order; one joins the previous
   kernel when its outer ranges equal the kernel's (size-1 dims ignored) and every load of a
   buffer computed in that kernel reads the element stored in the same iteration (so the shared
   loop nest, parallel over its outer dims, computes it in order). Rules: ``epilogue`` (reads a
   reduction of the kernel), ``vertical`` (reads a pointwise of the kernel), ``horizontal``
   (independent sibling over the same ranges). Extern calls end a kernel.
3. **Memory**. A buffer read only inside its own kernel is a local variable (no memory). Other
   intermediate buffers get a storage slot; a slot whose last reader has run is given to a later
   buffer of the same byte size (``reuse``). Graph outputs always get fresh memory.
"""

from __future__ import annotations

import logging
import math

import sympy

from . import ir

__all__ = ["Scheduler", "FusedKernel", "SchedulerNode", "INLINE_BUDGET", "BROADCAST_OPS", "INNER_MIN_ROWS",
           "INNER_SERIAL_ELEMENTS"]

log = logging.getLogger("ember._inductor.scheduler")

#: The most ops (body ops x number of loads) an inlined producer may add to its consumers.
INLINE_BUDGET = 24
#: The most ops an inlined producer may recompute per element when its consumer broadcasts it.
BROADCAST_OPS = 3
#: A bigger pointwise loop joins a reduction kernel of fewer rows (outer iterations) than this as an inner
#: loop only when it has at most ``INNER_SERIAL_ELEMENTS`` elements: the rows are split over the threads,
#: the inner loop is not (small loops still save a kernel launch).
INNER_MIN_ROWS = 32
INNER_SERIAL_ELEMENTS = 16384


class SchedulerNode:
    """A computed buffer placed in a kernel: ``body`` over the kernel's loop symbols ``x0..``."""

    def __init__(self, buffer, body, index, inner_ranges=()):
        self.buffer = buffer
        self.body = body
        self.index = index  # the buffer's own index in kernel symbols (its store position)
        self.local = False  # read only inside its kernel: a local variable, no memory
        # a pointwise node over the kernel's outer dims plus these: an inner loop over y0.. per
        # outer iteration (softmax's normalisation after its row reductions)
        self.inner_ranges = list(inner_ranges)

    @property
    def is_reduction(self):
        """Whether the node computes a reduction."""
        return isinstance(self.buffer.data, ir.Reduction)

    def __str__(self):
        data = self.buffer.data
        target = f"{self.buffer.name}" + (" (local)" if self.local else "")
        if isinstance(data, ir.Reduction):
            rnames = ", ".join(f"{v} < {s}" for v, s in zip(ir.reduction_vars(len(data.reduction_ranges)),
                                                              data.reduction_ranges))
            return f"{target} = reduce_{data.reduction_type}({rnames}: {self.body})"
        if self.inner_ranges:
            ynames = ", ".join(f"{v} < {r}" for v, r in zip(ir.index_vars(len(self.inner_ranges), "y"),
                                                           self.inner_ranges))
            return f"{target} = for({ynames}: {self.body})"
        return f"{target} = {self.body}"


class FusedKernel:
    """One loop nest over ``ranges`` (symbols ``x0..``) computing ``nodes`` in order."""

    def __init__(self, name, ranges):
        self.name = name
        self.ranges = ranges
        self.nodes = []

    @property
    def vars(self):
        """The loop symbols ``x0..`` over ``ranges``."""
        return ir.index_vars(len(self.ranges), "x")

    def buffers(self):
        """The names of the buffers the kernel's nodes compute (a set)."""
        return {n.buffer.name for n in self.nodes}

    def __str__(self):
        loops = ", ".join(f"{v} < {s}" for v, s in zip(self.vars, self.ranges)) or "scalar"
        lines = [f"kernel {self.name} over ({loops}):"]
        lines += ["  " + str(n) for n in self.nodes]
        return "\n".join(lines)


def _key(ranges):
    return tuple(s for s in ranges if s != 1)


class Scheduler:
    """Schedules a lowered :class:`~ember._inductor.graph.GraphLowering`.

    Attributes:
        steps (list[FusedKernel | ExternKernel]): what runs, in order.
        storage (dict[str, str]): buffer name -> storage slot name, for buffers in memory.
        decisions (list[tuple[str, str]]): (rule, what it decided), in order.
    """

    def __init__(self, graph):
        self.graph = graph
        self.decisions = []
        self.steps = []
        self.storage = {}
        self._rewrites = {}  # the index rewrites of the passes below (ir.substitute's memo), dropped after them
        self._inline()
        self._group()
        self._plan_memory()
        del self._rewrites, self._readers

    def _decide(self, rule, text):
        self.decisions.append((rule, text))
        log.debug("%s: %s", rule, text)

    # 1. inlining ---------------------------------------------------------------------------

    def _inline(self):
        graph = self.graph
        protected = {b.name for b in graph.outputs if isinstance(b, ir.Buffer)}
        for step in graph.buffers:
            if isinstance(step, ir.ExternKernel):
                protected.update(b.name for b in step.inputs())
        load_count = {}
        self._readers = {}  # buffer name -> the computed buffers loading it (a broadcast check reads them)
        for step in graph.buffers:
            if isinstance(step, ir.ComputedBuffer):
                for ld in ir.loads(step.data.body):
                    load_count[ld.buffer.name] = load_count.get(ld.buffer.name, 0) + 1
                    readers = self._readers.setdefault(ld.buffer.name, [])
                    if not readers or readers[-1] is not step:
                        readers.append(step)

        self.inlined = {}  # name -> body (already with its own producers inlined)
        self.bodies = {}  # name -> body after inlining, for buffers that stay
        self.aliases = {}  # name -> an earlier buffer computing the same thing
        seen = {}
        keys = StructuralKeys()
        for step in graph.buffers:
            if not isinstance(step, ir.ComputedBuffer):
                continue
            body = self._inline_into(step.data.body)
            name = step.name
            key = _computation_key(step, body, keys)
            if key in seen and name not in protected:
                self.aliases[name] = seen[key]
                self._decide("common_subexpression", f"{name} computes what {seen[key].name} does: it reads that")
                continue
            seen.setdefault(key, step)
            if isinstance(step.data, ir.Pointwise) and name not in protected:
                ok, rule, why = self._should_inline(step, body, load_count.get(name, 0))
                self._decide(rule, f"{name}: {why}")
                if ok:
                    self.inlined[name] = (step, body)
                    continue
            self.bodies[name] = body

    def _should_inline(self, buffer, body, uses):
        ops = ir.count_ops(body)
        if uses <= 1:
            return True, "inline_single_use", "loaded once, inlined into its consumer"
        if ops * uses > INLINE_BUDGET:
            return False, "keep", f"{ops} ops x {uses} loads exceeds the inline budget {INLINE_BUDGET}"
        if ops > BROADCAST_OPS and self._broadcast_consumer(buffer):
            return False, "keep", f"{ops} ops would be recomputed per element of a broadcasting consumer"
        return True, "inline_cheap", f"{ops} ops x {uses} loads"

    def _broadcast_consumer(self, buffer):
        # the buffer's readers, listed once by _inline (scanning every buffer's loads per candidate was
        # quadratic: 3 s of mobilenet_v2's scheduling)
        for step in self._readers.get(buffer.name, ()):
            total = step.numel * (_numel(step.data.reduction_ranges) if isinstance(step.data, ir.Reduction) else 1)
            if total > buffer.numel:
                return True
        return False

    def _inline_into(self, body):
        def replace(load, index):
            target = self.aliases.get(load.buffer.name)
            entry = self.inlined.get(target.name if target is not None else load.buffer.name)
            if entry is None:
                return ir.Load(target, index) if target is not None else None
            producer, pbody = entry
            mapping = dict(zip(ir.index_vars(len(producer.sizes)), index))
            value = ir.substitute(pbody, mapping, rewrites=self._rewrites)
            if value.dtype != producer.dtype:  # a half buffer computed in float32 rounds where it is read
                value = ir.Op("to_dtype", (value,), producer.dtype)
            return value

        return ir.substitute(body, {}, replace, rewrites=self._rewrites)

    # 2. grouping ---------------------------------------------------------------------------

    def _group(self):
        kernel = None
        count = 0
        for step in self.graph.buffers:
            if isinstance(step, ir.ExternKernel):
                self.steps.append(step)
                kernel = None
                continue
            if step.name in self.inlined or step.name in self.aliases:
                continue
            key = _key(step.sizes)
            if kernel is not None and self._inner_candidate(kernel, step, key):
                outer = len(kernel.ranges)
                node = self._node_for(step, key, outer)
                rule = self._fusable(kernel, node)
                if rule is not None:
                    self._decide("inner_epilogue", f"{step.name} joins kernel {kernel.name} as an inner loop")
                    kernel.nodes.append(node)
                    continue
            node = self._node_for(step, key)
            target = self._earlier_kernel(node, key)
            if target is not None:
                rule = self._fusable(target, node)
                if rule is not None:
                    where = "" if target is kernel else " (moved up past steps it does not read)"
                    self._decide(rule, f"{step.name} joins kernel {target.name}{where}")
                    target.nodes.append(node)
                    continue
            kernel = FusedKernel(f"kernel{count}", list(key))
            count += 1
            kernel.nodes.append(node)
            self.steps.append(kernel)

    def _earlier_kernel(self, node, key):
        """The latest kernel over ``key`` that ``node`` may join: walking back from the last step, stop at
        a step that computes something ``node`` reads (it must run after that step)."""
        reads = {ld.buffer.name for ld in ir.loads(node.body)}
        for step in reversed(self.steps):
            if isinstance(step, FusedKernel):
                if _key(step.ranges) == key and all(not n.inner_ranges for n in step.nodes):
                    return step
                if reads & step.buffers():
                    return None
            elif reads & {o.name for o in step.outputs}:
                return None
        return None

    @staticmethod
    def _inner_candidate(kernel, buffer, key):
        """A pointwise buffer over the kernel's outer dims followed by more dims, in a kernel with reductions,
        unless the kernel has few rows and the loop many elements (:data:`INNER_MIN_ROWS`; the rows are what
        the threads or Triton programs share: cross-entropy's gradient, 65,536 elements, as an inner loop of
        its scalar count of targets ran on one thread, 1 ms of a 14 ms step)."""
        outer = tuple(kernel.ranges)
        if not (isinstance(buffer.data, ir.Pointwise) and any(n.is_reduction for n in kernel.nodes)
                and len(key) > len(outer) and key[:len(outer)] == outer):
            return False
        return ir.size_hint(math.prod(outer)) >= INNER_MIN_ROWS or ir.size_hint(math.prod(key)) <= INNER_SERIAL_ELEMENTS

    def _node_for(self, buffer, key, outer=None):
        """The node of ``buffer`` in kernel symbols: ``x0..`` for its dims (size-1 dims read 0), or, given
        ``outer``, ``x0..`` for the first ``outer`` non-1 dims and ``y0..`` (an inner loop) for the rest."""
        outer = len(key) if outer is None else outer
        syms = ir.index_vars(outer, "x") + ir.index_vars(len(key) - outer, "y")
        it = iter(syms)
        index = [sympy.Integer(0) if s == 1 else next(it) for s in buffer.sizes]
        mapping = dict(zip(ir.index_vars(len(buffer.sizes)), index))
        body = ir.substitute(self.bodies[buffer.name], mapping, rewrites=self._rewrites)
        return SchedulerNode(buffer, body, tuple(index), key[outer:])

    def _fusable(self, kernel, node):
        inside = {n.buffer.name: n for n in kernel.nodes}
        reads = [ld for ld in ir.loads(node.body) if ld.buffer.name in inside]
        for ld in reads:
            store = inside[ld.buffer.name].index
            if any(sympy.expand(a - b) != 0 for a, b in zip(ld.index, store)):
                self._decide("no_fusion", f"{node.buffer.name} reads {ld.buffer.name} at another element")
                return None
        if not reads:
            return "horizontal"
        if any(inside[ld.buffer.name].is_reduction for ld in reads):
            return "epilogue"
        return "vertical"

    # 3. memory -----------------------------------------------------------------------------

    def _plan_memory(self):
        graph = self.graph
        outputs = {b.name for b in graph.outputs if isinstance(b, ir.Buffer)}
        last_use = {}
        kernel_of = {}
        for s, step in enumerate(self.steps):
            if isinstance(step, ir.ExternKernel):
                for b in step.inputs():
                    last_use[b.name] = s
                continue
            for node in step.nodes:
                kernel_of[node.buffer.name] = s
                for ld in ir.loads(node.body):
                    last_use[ld.buffer.name] = max(last_use.get(ld.buffer.name, -1), s)
        for s, step in enumerate(self.steps):
            if isinstance(step, FusedKernel):
                for node in step.nodes:
                    name = node.buffer.name
                    if node.inner_ranges:  # its values live only inside one inner loop
                        continue
                    if name not in outputs and last_use.get(name, s) == s:
                        node.local = True
                        self._decide("local", f"{name} is read only inside {step.name}: a local variable")

        free = {}  # nbytes -> [storage names]
        releases = {}
        for s, step in enumerate(self.steps):
            for node in step.nodes if isinstance(step, FusedKernel) else ():
                buf = node.buffer
                if node.local:
                    continue
                if buf.name in outputs:
                    self.storage[buf.name] = buf.name
                    continue
                # the exact size (an expression when sizes are dynamic): storage is shared only by
                # buffers of the same size at every size
                nbytes = sympy.expand(math.prod(buf.sizes) * buf.dtype.itemsize)
                pool = free.get(nbytes)
                if pool:
                    slot = pool.pop()
                    self._decide("reuse", f"{buf.name} reuses the memory of {slot} ({nbytes} bytes)")
                else:
                    slot = buf.name
                self.storage[buf.name] = slot
                releases.setdefault(last_use.get(buf.name, s), []).append((nbytes, slot))
            for nbytes, slot in releases.pop(s, []):
                free.setdefault(nbytes, []).append(slot)

    # printing ------------------------------------------------------------------------------

    def __str__(self):
        lines = []
        for step in self.steps:
            if isinstance(step, ir.ExternKernel):
                lines.append(str(step))
            else:
                lines.append(str(step))
        reused = [f"{b} -> {s}" for b, s in self.storage.items() if b != s]
        if reused:
            lines.append("memory reuse: " + ", ".join(reused))
        return "\n".join(lines)


def _computation_key(buffer, body, keys):
    data = buffer.data
    reduction = (tuple(data.reduction_ranges), data.reduction_type) if isinstance(data, ir.Reduction) else None
    return (str(buffer.dtype), tuple(buffer.sizes), reduction, keys(body))


class StructuralKeys:
    """:func:`ir.structural_key`, memoised: ``keys(expr)`` is ``ir.structural_key(expr)``.

    The key holds the text of every SymPy index the expression loads at, and SymPy's printer is slow
    (a few hundred microseconds an index). Callers ask for the keys of every node of a tree (the C++
    printer's common subexpressions, the scheduler's duplicate buffers), and many trees load at the
    same indices: computed afresh, the keys were half of a compile's lowering (issue 28). Here each
    node's key is computed once (by identity: the memo holds the node, so its id is not reused) and
    each index printed once (by value: equal SymPy expressions print alike). Keep one per pass: the
    memo keeps every expression it has seen alive.
    """

    def __init__(self):
        self._nodes = {}  # id(expr) -> (expr, key)
        self._text = {}  # SymPy index -> str(index)

    def __call__(self, expr):
        hit = self._nodes.get(id(expr))
        if hit is not None:
            return hit[1]
        if isinstance(expr, ir.Load):
            key = ("load", expr.buffer.name, tuple(self._index_text(i) for i in expr.index))
        elif isinstance(expr, ir.Op):  # ir.structural_key's rule, over the memoised keys of the operands
            key = (expr.name, str(expr.dtype), tuple(self(a) for a in expr.args))
        else:  # a constant or an index expression: one level, no loads
            key = ir.structural_key(expr)
        self._nodes[id(expr)] = (expr, key)
        return key

    def _index_text(self, index):
        index = sympy.sympify(index)
        text = self._text.get(index)
        if text is None:
            text = self._text[index] = str(index)
        return text


def _numel(sizes):
    n = 1
    for s in sizes:
        n *= ir.size_hint(s)  # a cost estimate: at the hints when sizes are dynamic
    return n
