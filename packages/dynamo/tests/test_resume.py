"""ember._dynamo.resume: resume functions and break functions, checked against running the original.

The central check (``test_resume_at_every_boundary``) instruments a copy of a function so that,
each time execution reaches a chosen instruction, the real stack values and locals are recorded;
the resume function built for that instruction is then called with them, and must return what
the original function returns. Hand-written tests cover break functions (a call, a conditional
jump both ways, plain instructions), ``with`` blocks, ``try`` blocks, cells and unbound locals.
"""

from __future__ import annotations

import copy
import dis
import os
import sys
import types

import pytest

try:
    from ember._dynamo import resume
except ImportError:  # a bare interpreter: load the stdlib-only modules straight from the source tree
    _SRC = os.path.join(os.path.dirname(__file__), "..", "src", "ember")
    for _name, _path in (("ember", _SRC), ("ember._dynamo", os.path.join(_SRC, "_dynamo"))):
        _mod = types.ModuleType(_name)
        _mod.__path__ = [_path]
        sys.modules[_name] = _mod
    from ember._dynamo import resume

from ember._dynamo.bytecode import analysis, assemble, decode, live_locals_at, stack_depth_at, versions  # noqa: E402
from ember._dynamo.bytecode.instructions import Instruction  # noqa: E402
from ember._dynamo.resume import NULL, CannotResume, Successor  # noqa: E402

PY313 = sys.version_info >= (3, 13)


# --- functions to resume ---------------------------------------------------------------------
def f_loop(n, xs):
    total = 0
    for i in range(n):
        if i % 2:
            total += xs[i % len(xs)] * 2
        else:
            total -= i
    return total


def f_while(n):
    a, b, k = 0, 1, 0
    while k < n:
        a, b = b, a + b
        k += 1
        if a > 50:
            break
    else:
        a = -a
    return a, b, k


def f_nested(xs):
    out = ()
    for x in xs:
        for y in xs:
            if x == y:
                continue
            out += ((x, y),)
            if len(out) > 5:
                return out
    return out


def f_try(xs):
    got = 0
    for x in xs:
        try:
            got += 100 // x
        except ZeroDivisionError:
            got -= 1
        finally:
            got += 1000
    return got


class Plain:
    def __init__(self):
        self.entered = 0

    def __enter__(self):
        return 7

    def __exit__(self, *exc):
        return False


PLAIN = Plain()


def f_with(x):
    y = x
    with PLAIN as v:
        y = y * v
        y += 1
    return y


def f_short_circuit(a, b, c):
    r = a and b or c
    s = (a or b) and not c
    t = a if b else c
    return r, s, t, a < b < c


def f_cells(x):
    k = x + 1

    def add(v):
        return v + k

    k += 10
    return add(1), k


def f_comprehension(xs):
    i = 0  # bound before the comprehension, so 3.12's saved copy of it is never NULL
    ys = [i * 2 for i in xs]
    zs = {i: i for i in ys if i > 2}
    return ys, zs, i


def f_match(v):
    match v:
        case (a, b):
            r = a + b
        case {"k": w}:
            r = w
        case int() if v > 3:
            r = v * 10
        case _:
            r = 0
    return r


def f_unpack(t):
    a, *b, c = t
    (d, e), f = (a, c), b
    return d + e, f


class SuperBase:
    def m(self, v):
        return v + 1


class SuperChild(SuperBase):
    def m(self, v):
        y = v * 2
        z = super().m(y)
        w = [z, super()]  # zero-argument super() reads `self` from the frame's first slot
        return z + 1, w[1].m(0), len(w)


SCALE = 3


def f_varargs(a, /, *rest, k=3, **kw):
    s = a * k
    for r in rest:
        s += r
    return s, sorted(kw), len(rest), rest


def f_misc(d, s):
    out = f"{s}:{d['a']!r}:{d['a']:>4}"
    d = dict(d)
    d["a"] += 1
    d["b"] = d.get("b", 0) * 2 if "b" in d else -1
    del d["a"]
    t = s[1:3] + s[::-1]
    assert len(t) > 2, "short"
    if (n := len(t)) > 3:
        t = t * SCALE
    lo, *mid, hi = t
    return out, d, t, n, lo, hi, len(mid), 1 < n <= 10 != SCALE


def f_try_in_loop(xs):
    done = 0
    i = 0
    while i < len(xs):
        x = xs[i]
        i += 1
        try:
            if x is None:
                continue
            if x < 0:
                raise ValueError(x)
            done += x
        except ValueError:
            done -= 100
            break
        finally:
            done += 1
    return done, i


class Log:
    def __init__(self):
        self.n = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return exc[0] is ZeroDivisionError


LOG = Log()


def f_nested_with_try(a, b):
    r = 0
    with LOG:
        with LOG as g:
            r = a + (g is LOG)
            try:
                r = r // b
            finally:
                r += 10
        r += 100
    return r


def f_lambdas(k):
    scale = k * 2
    fs = [lambda v, j=j: v * j + scale for j in range(3)]
    total = 0
    for f in fs:
        total += f(k)
    return total, scale


CASES = [
    (f_varargs, (1, 2, 3)),
    (SuperChild.m, (SuperChild(), 3)),
    (f_misc, ({"a": 3, "b": 4}, "hello")),
    (f_misc, ({"a": 1}, "abc")),
    (f_try_in_loop, ((1, None, 2, -1, 5),)),
    (f_try_in_loop, ((3, 4),)),
    (f_nested_with_try, (5, 2)),
    (f_nested_with_try, (5, 0)),
    (f_lambdas, (3,)),
    (f_loop, (7, (3, 4, 5))),
    (f_while, (20,)),
    (f_while, (3,)),
    (f_nested, ((1, 2, 3),)),
    (f_try, ((1, 0, 5),)),
    (f_with, (3,)),
    (f_short_circuit, (1, 0, 2)),
    (f_short_circuit, (0, 3, 0)),
    (f_cells, (4,)),
    (f_comprehension, ((1, 2, 3),)),
    (f_match, ((1, 2),)),
    (f_match, ({"k": 9},)),
    (f_match, (5,)),
    (f_unpack, ((1, 2, 3, 4),)),
]

_NULL_MAKERS = {"PUSH_NULL", "LOAD_METHOD", "LOAD_FAST_AND_CLEAR"}
_CALLS = {"CALL", "CALL_KW", "CALL_FUNCTION_EX"}


def _pushes_null(ins: Instruction) -> bool:
    if ins.opname in _NULL_MAKERS:
        return True
    if ins.opname == "LOAD_GLOBAL" or (ins.opname in ("LOAD_ATTR", "LOAD_SUPER_ATTR") and sys.version_info >= (3, 12)):
        return bool(ins.arg & 1)
    return False


def _probe_points(code):
    """Offsets where the stack can be copied: no NULL on it, normally reachable, not glued."""
    dec = decode(code)
    insns = dec.instructions
    normal = analysis.normally_reachable(insns)
    unsafe = set()
    for k, ins in enumerate(insns):
        if ins.opname == "FOR_ITER":  # a finished FOR_ITER lands a fixed distance after its target
            t = insns.index(ins.target)
            unsafe.update(range(t, t + versions.FOR_ITER_EXIT_SKIP + 1))
        if ins.opname == "LOAD_FAST_AND_CLEAR":  # 3.12+: the saved value may be NULL until restored
            restore = [
                j
                for j in range(k + 1, len(insns))
                if insns[j].opname == "STORE_FAST" and insns[j].argval == ins.argval and normal[j]
            ]
            unsafe.update(range(k + 1, restore[-1] + 1))
    points = []
    pending = 0  # calls whose NULL is on the stack
    for i, ins in enumerate(insns):
        ok = (
            normal[i]
            and pending == 0
            and i not in unsafe
            and ins.opname not in ("RESUME", "MAKE_CELL", "COPY_FREE_VARS", "RETURN_GENERATOR")
            and ins.opcode not in versions.GLUED_TO_PREVIOUS
        )
        if ok:
            points.append(ins.offset)
        if _pushes_null(ins) and ins.opname != "LOAD_FAST_AND_CLEAR":
            pending += 1
        if ins.opname in _CALLS:
            pending = max(0, pending - 1)
    return points


def _snapshot(v, memo):
    # Iterators move on after the probe; give the resume function one at the probe's position.
    # Containers (a comprehension's list, a dict being edited) change later: copy them, once per
    # object, so a value that is both on the stack and in a local stays one object.
    if (hasattr(v, "__next__") and hasattr(v, "__reduce__")) or type(v) in (list, dict, set):
        if id(v) not in memo:
            memo[id(v)] = copy.copy(v)
        return memo[id(v)]
    return v


def _record(hits):
    def record(stack, locs):
        memo = {}
        hits.append((tuple(_snapshot(v, memo) for v in stack), {k: _snapshot(v, memo) for k, v in locs.items()}))

    return record


def _instrument(fn, offset, record):
    """A copy of ``fn`` that calls ``record(stack_tuple, locals())`` before the instruction at ``offset``."""
    code = fn.__code__
    depth = stack_depth_at(code, offset)
    dec = decode(code)
    target = dec.at(offset)
    rec, loc = len(code.co_consts), len(code.co_consts) + 1
    consts = code.co_consts + (record, locals)

    def call(const, args, n):
        head = [Instruction.make("LOAD_CONST", const), Instruction.make("PUSH_NULL")]
        if versions.CALL_STYLE == "null_first":
            head.reverse()
        tail = [Instruction.make("CALL", n)]
        if versions.PRECALL_OPCODE is not None:
            tail.insert(0, Instruction.make("PRECALL", n))
        return head + args + tail

    copies = [Instruction.make("COPY", depth + 2) for _ in range(depth)] + [Instruction.make("BUILD_TUPLE", depth)]
    probe = call(rec, copies + call(loc, [], 0), 2) + [Instruction.make("POP_TOP")]
    for ins in dec.instructions:
        if ins.target is target:
            ins.target = probe[0]
    for entry in dec.exception_table:
        if entry.target is target:
            entry.target = probe[0]
        if entry.start is target:
            entry.start = probe[0]
    i = dec.instructions.index(target)
    body = dec.instructions[:i] + probe + dec.instructions[i:]
    new = assemble(body, dec.exception_table, template=code, co_consts=consts)
    clone = types.FunctionType(new, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    clone.__kwdefaults__ = fn.__kwdefaults__
    return clone


@pytest.mark.parametrize("fn,args", CASES, ids=[f"{f.__name__}-{i}" for i, (f, _) in enumerate(CASES)])
def test_resume_at_every_boundary(fn, args):
    expected = fn(*args)
    points = _probe_points(fn.__code__)
    assert len(points) > 5
    resumed = 0
    for offset in points:
        hits = []
        probe = _instrument(fn, offset, _record(hits))
        assert probe(*args) == expected, f"the probe changed {fn.__name__} at {offset}"
        succ = Successor(offset, stack_depth_at(fn.__code__, offset), live_locals_at(fn.__code__, offset))
        cont = resume.make_resume_function(fn.__code__, succ, fn.__globals__, fn.__closure__)
        for stack, locs in hits[:3]:
            values = [locs.get(name, NULL) for name in succ.live_locals]
            assert cont(*stack, *values) == expected, f"{fn.__name__} resumed at offset {offset} with {stack}"
            resumed += 1
    assert resumed > 5


@pytest.mark.parametrize("fn,args", CASES, ids=[f"{f.__name__}-{i}" for i, (f, _) in enumerate(CASES)])
def test_break_at_every_boundary(fn, args):
    # A break function at each probe-able instruction, given the real stack and locals there, runs
    # that instruction natively and resumes: the result must be the original's.
    expected = fn(*args)
    code = fn.__code__
    broke = 0
    for offset in _probe_points(code):
        try:
            plan = resume.plan_graph_break(code, offset, stack_depth_at(code, offset))
        except CannotResume:
            continue
        if plan.offset != offset:
            continue
        hits = []
        assert _instrument(fn, offset, _record(hits))(*args) == expected
        conts = [resume.make_resume_function(code, s, fn.__globals__, fn.__closure__) for s in plan.successors]
        brk = resume.make_break_function(plan, conts, fn.__globals__, fn.__closure__)
        for stack, locs in hits[:2]:
            values = [locs.get(name, NULL) for name in plan.live_locals]
            assert brk(*stack, *values) == expected, f"{fn.__name__} broken at offset {offset} with {stack}"
            broke += 1
    assert broke > 5


def test_resume_at_loop_head_with_iteration_k_locals():
    code = f_loop.__code__
    head = next(ins for ins in decode(code).instructions if ins.opname == "FOR_ITER")
    succ = Successor(head.offset, stack_depth_at(code, head.offset), live_locals_at(code, head.offset))
    assert succ.stack_depth == 1 and succ.live_locals == ("xs", "total")
    cont = resume.make_resume_function(code, succ, f_loop.__globals__)
    xs, n = (3, 4, 5), 9
    for k in range(n + 1):
        total = f_loop(k, xs)  # the locals after k iterations
        assert cont(iter(range(k, n)), xs, total) == f_loop(n, xs)


def test_resume_code_is_cached_and_named():
    code = f_loop.__code__
    succ = Successor(0, 0, live_locals_at(code, 0))
    a = resume.make_resume_function(code, succ, f_loop.__globals__)
    b = resume.make_resume_function(code, succ, f_loop.__globals__)
    assert a.__code__ is b.__code__
    assert a.__name__ == "f_loop__resume_at_0"
    assert a(5, (1, 2)) == f_loop(5, (1, 2))
    resume.clear_cache()
    assert resume.make_resume_function(code, succ, f_loop.__globals__).__code__ is not a.__code__


def test_resume_leaves_null_locals_unbound():
    def f(flag):
        if flag:
            y = 1
        return y  # noqa: F821 - unbound when flag is false

    code = f.__code__
    ret = next(ins for ins in decode(code).instructions if ins.opname.startswith("LOAD_FAST") and ins.argval == "y")
    succ = Successor(ret.offset, 0, live_locals_at(code, ret.offset))
    assert succ.live_locals == ("y",)
    cont = resume.make_resume_function(code, succ, f.__globals__)
    assert cont(5) == 5
    with pytest.raises(UnboundLocalError):
        cont(NULL)


def test_resume_with_cells_and_free_variables():
    def outer(x):
        k = x * 2

        def inner(d):
            return d + k + x

        z = inner(1)
        return z, inner(2)

    code = outer.__code__
    insns = decode(code).instructions
    # resume right after `z = inner(1)`: k and x are cells, inner a plain local
    store_z = next(ins for ins in insns if ins.opname.startswith("STORE_FAST") and ins.argval == "z")
    nxt = insns[insns.index(store_z) + 1]
    succ = Successor(nxt.offset, 0, live_locals_at(code, nxt.offset))
    assert set(succ.live_locals) >= {"z", "inner"}
    cont = resume.make_resume_function(code, succ, outer.__globals__)
    inner = outer(3)  # noqa: F841 - the closure of a real run
    vals = {"z": 10, "inner": (lambda d: d + 100), "x": 3, "k": 6}
    assert cont(*[vals[n] for n in succ.live_locals]) == (10, 102)

    # a function with free variables resumes with the original closure
    def make(step):
        def count(n):
            total = 0
            for _ in range(n):
                total += step
            return total

        return count

    count = make(5)
    c = count.__code__
    head = next(ins for ins in decode(c).instructions if ins.opname == "FOR_ITER")
    succ = Successor(head.offset, 1, live_locals_at(c, head.offset))
    cont = resume.make_resume_function(c, succ, count.__globals__, count.__closure__)
    assert cont(iter(range(2)), 100) == 110
    with pytest.raises(ValueError, match="free variables"):
        resume.make_resume_function(c, succ, count.__globals__, None)


def test_resume_inside_with_block_runs_exit():
    log = []

    class Ctx:
        def __enter__(self):
            log.append("enter")
            return self

        def __exit__(self, *exc):
            log.append(("exit", exc[0]))
            return exc[0] is KeyError  # swallow KeyError

    def f(x):
        with Ctx():
            y = x + 1
            if y > 5:
                raise KeyError(y)
            y = y * 2
        return y

    code = f.__code__
    insns = decode(code).instructions
    store_y = next(ins for ins in insns if ins.opname.startswith("STORE_FAST") and ins.argval == "y")
    nxt = insns[insns.index(store_y) + 1]
    succ = Successor(nxt.offset, stack_depth_at(code, nxt.offset), live_locals_at(code, nxt.offset))
    assert succ.stack_depth == 1  # __exit__
    cont = resume.make_resume_function(code, succ, f.__globals__, f.__closure__)
    for x in (1, 10):
        log.clear()
        ctx = Ctx()
        ctx.__enter__()
        got = cont(ctx.__exit__, *[{"x": x, "y": x + 1}[n] for n in succ.live_locals])
        log_resumed = list(log)
        log.clear()
        assert got == f(x)
        assert log_resumed == log  # entered once, exited once, with the same exception


def test_resume_inside_try_block_handler_still_catches():
    def f(a, b):
        out = 0
        try:
            out = a + 1
            out = out // b
            out += 5
        except ZeroDivisionError:
            out = -1
        finally:
            out *= 10
        return out

    code = f.__code__
    insns = decode(code).instructions
    store = [ins for ins in insns if ins.opname.startswith("STORE_FAST") and ins.argval == "out"][1]
    nxt = insns[insns.index(store) + 1]  # inside the try body, before `out // b`
    succ = Successor(nxt.offset, stack_depth_at(code, nxt.offset), live_locals_at(code, nxt.offset))
    cont = resume.make_resume_function(code, succ, f.__globals__)
    for a, b in ((3, 2), (3, 0)):
        env = {"a": a, "b": b, "out": a + 1}
        assert cont(*[env[n] for n in succ.live_locals]) == f(a, b)


def test_resume_refuses_generators_and_handler_only_offsets():
    def g(n):
        yield n

    with pytest.raises(CannotResume, match="generator"):
        resume.plan_graph_break(g.__code__, 0, 0)
    with pytest.raises(CannotResume):
        resume.make_resume_function(g.__code__, Successor(0, 0, ()), {})

    def h(x):
        try:
            return 1 // x
        except ZeroDivisionError:
            return 0

    insns = decode(h.__code__).instructions
    push_exc = next(ins for ins in insns if ins.opname == "PUSH_EXC_INFO")
    with pytest.raises(CannotResume, match="exception handler"):
        resume.plan_graph_break(h.__code__, push_exc.offset, stack_depth_at(h.__code__, push_exc.offset))


def test_plan_checks_stack_depth_and_offset():
    code = f_loop.__code__
    first = decode(code).instructions[1].offset
    with pytest.raises(ValueError, match="stack_depth=3"):
        resume.plan_graph_break(code, first, 3)
    with pytest.raises(ValueError, match="not the start"):
        resume.plan_graph_break(code, 1, 0)


# --- break functions -------------------------------------------------------------------------
def _offset_of(fn, opname, nth=0, argval=None):
    found = [
        ins for ins in dis.get_instructions(fn) if ins.opname == opname and (argval is None or ins.argval == argval)
    ]
    return found[nth].offset


def _call_offset(fn, nth=0):
    """Offset of the nth call group (3.11: its PRECALL/KW_NAMES; 3.12: KW_NAMES or CALL)."""
    calls = [ins for ins in dis.get_instructions(fn) if ins.opname in ("CALL", "CALL_KW", "CALL_FUNCTION_EX")]
    return calls[nth].offset


def _break_and_resume(fn, plan, stack, locs):
    conts = [resume.make_resume_function(plan.code, s, fn.__globals__, fn.__closure__) for s in plan.successors]
    brk = resume.make_break_function(plan, conts, fn.__globals__, fn.__closure__)
    return brk(*stack, *[locs[n] if n in locs else NULL for n in plan.live_locals])


def _helper(a, b=1, *, c=0):
    return a * 100 + b * 10 + c


def test_break_at_call():
    def f(x):
        y = x + 1
        z = _helper(y, 2)
        return z + y

    plan = resume.plan_graph_break(f.__code__, _call_offset(f), 4)
    assert len(plan.successors) == 1
    assert plan.live_locals == ("y",)
    stack = [NULL, _helper, 4, 2] if versions.CALL_STYLE == "null_first" else [_helper, NULL, 4, 2]
    assert _break_and_resume(f, plan, stack, {"y": 4}) == f(3)


def test_break_at_call_with_keywords_and_method_and_deep_stack():
    class Box:
        def __init__(self, v):
            self.v = v

        def scaled(self, k, *, off=0):
            return self.v * k + off

    def f(b, k):
        r = [1, _helper(2, b.scaled(k, off=1), c=3)]
        return r

    box = Box(5)
    # break at the inner method call b.scaled(k, off=1); below it are the list's 1 and
    # _helper's call (NULL+_helper, or _helper+NULL on 3.13) with its first argument.
    inner = _call_offset(f, 0)
    plan = resume.plan_graph_break(f.__code__, inner, stack_depth_at(f.__code__, inner))
    if versions.CALL_STYLE == "null_first":
        stack = [1, NULL, _helper, 2, NULL, box.scaled, 3, 1]
    else:
        stack = [1, _helper, NULL, 2, box.scaled, NULL, 3, 1, ("off",)]
    assert plan.stack_depth == len(stack)
    assert _break_and_resume(f, plan, stack, {"b": box, "k": 3}) == f(box, 3)
    # the same break with the method in its unbound form (function, self), as LOAD_ATTR pushes it
    stack[4:6] = [Box.scaled, box]
    assert _break_and_resume(f, plan, stack, {"b": box, "k": 3}) == f(box, 3)


def _depth_of_group(code, offset):
    """Stack depth before the call group that the instruction at ``offset`` belongs to."""
    dec = decode(code)
    i = dec.index_of(offset)
    first, _ = resume._group(dec.instructions, i)
    return stack_depth_at(code, dec.instructions[first].offset)


class Truthy:
    def __init__(self, value):
        self.value = value

    def __bool__(self):
        return bool(self.value)


@pytest.mark.parametrize("flag", [True, False])
def test_break_at_conditional_jump_both_ways(flag):
    def f(x, flag):
        y = x * 2
        if flag:
            y += 1
        else:
            y -= 1
        return y

    code = f.__code__
    jump = next(ins for ins in decode(code).instructions if ins.opcode in versions.CONDITIONAL_JUMPS)
    depth = stack_depth_at(code, jump.offset)
    plan = resume.plan_graph_break(code, jump.offset, depth)
    assert len(plan.successors) == 2
    assert _break_and_resume(f, plan, [flag], {"y": 6, "x": 3}) == f(3, flag)
    # the translator may hand over the un-converted condition (a tensor, whose __bool__ reads its
    # value): 3.13's jumps only accept True/False, so the break function converts it first
    assert _break_and_resume(f, plan, [Truthy(flag)], {"y": 6, "x": 3}) == f(3, flag)


def test_break_at_conditional_jump_inside_loop_goes_backward_on_311():
    # a loop-closing conditional jump (3.11: POP_JUMP_BACKWARD_IF_*) becomes a forward jump to a stub
    def f(n):
        i = 0
        total = 0
        while i < n:
            total += i
            i += 1
        return total

    code = f.__code__
    jumps = [ins for ins in decode(code).instructions if ins.opcode in versions.CONDITIONAL_JUMPS]
    for jump in jumps:
        depth = stack_depth_at(code, jump.offset)
        plan = resume.plan_graph_break(code, jump.offset, depth)
        for i, total in ((0, 0), (2, 1), (5, 10)):
            got = _break_and_resume(f, plan, [i < 5], {"i": i, "total": total, "n": 5})
            assert got == f(5)


def test_break_at_plain_instructions():
    class Obj:
        pass

    def f(o, a, b):
        c = a * b
        o.attr = c
        d = c - a
        return d, o.attr

    code = f.__code__
    # BINARY_OP a * b
    mul = _offset_of(f, "BINARY_OP")
    plan = resume.plan_graph_break(code, mul, 2)
    o = Obj()
    assert _break_and_resume(f, plan, [3, 4], {"o": o, "a": 3, "b": 4}) == f(Obj(), 3, 4)
    # STORE_ATTR o.attr = c (no result)
    st = _offset_of(f, "STORE_ATTR")
    plan = resume.plan_graph_break(code, st, 2)
    o = Obj()
    assert _break_and_resume(f, plan, [12, o], {"o": o, "a": 3, "c": 12}) == (9, 12)
    assert o.attr == 12


def test_break_instruction_that_raises_runs_the_handler_natively():
    def f(a, b):
        try:
            r = a // b
        except ZeroDivisionError:
            r = "div"
        return r

    code = f.__code__
    div = _offset_of(f, "BINARY_OP")
    plan = resume.plan_graph_break(code, div, stack_depth_at(code, div))
    assert _break_and_resume(f, plan, [7, 2], {}) == 3
    assert _break_and_resume(f, plan, [7, 0], {}) == "div"


def test_break_at_return_has_no_successor():
    def f(x):
        return x + 1

    ret = _offset_of(f, "RETURN_VALUE")
    plan = resume.plan_graph_break(f.__code__, ret, 1)
    assert plan.successors == ()
    assert _break_and_resume(f, plan, [41], {}) == 41


def test_break_function_argument_checks():
    with pytest.raises(ValueError, match="frame set-up"):
        resume.plan_graph_break(f_loop.__code__, 0, 0)
    first = decode(f_loop.__code__).instructions[1].offset
    plan = resume.plan_graph_break(f_loop.__code__, first, 0)
    with pytest.raises(ValueError, match="1 successors but 0"):
        resume.make_break_function(plan, [], f_loop.__globals__)


def test_break_inside_grad_mode_block():
    ember = pytest.importorskip("ember")
    if not hasattr(ember, "no_grad"):
        pytest.skip("ember core is not importable here")

    seen = []

    def f(x):
        with ember.no_grad():
            y = x * 2
            seen.append(ember.is_grad_enabled())
            z = y + 1
        return z, ember.is_grad_enabled()

    code = f.__code__
    call = _call_offset(f, 2)  # seen.append(...): the break point (after no_grad() and is_grad_enabled())
    depth = _depth_of_group(code, call)
    plan = resume.plan_graph_break(code, call, depth)
    ctx = ember.no_grad()
    ctx.__enter__()  # the runtime re-enters the context manager before calling the break function
    try:
        flag = ember.is_grad_enabled()
        meth = [seen.append, NULL] if PY313 else [NULL, seen.append]
        stack = [ctx.__exit__] + meth + [flag]
        assert len(stack) == plan.stack_depth
        out = _break_and_resume(f, plan, stack, {"x": 3, "y": 6})
    finally:
        if not ember.is_grad_enabled():
            ember.set_grad_enabled(True)
    assert out == (7, True)
    assert seen == [False]
    assert ember.is_grad_enabled()


@pytest.mark.parametrize("n_done", [0, 2, 3])
def test_break_at_for_iter_both_ways(n_done):
    def f(xs):
        total = 0
        for x in xs:
            total += x
        return total * 2

    code = f.__code__
    head = next(ins for ins in decode(code).instructions if ins.opname == "FOR_ITER")
    plan = resume.plan_graph_break(code, head.offset, 1)
    assert [s.stack_depth for s in plan.successors] == [2, 0]  # next item pushed / iterator popped
    xs = [1, 2, 3]
    it = iter(xs)
    for _ in range(n_done):
        next(it)
    total = sum(xs[:n_done])
    assert _break_and_resume(f, plan, [it], {"total": total}) == f(xs)


def test_break_at_for_iter_with_break_statement_after_loop():
    def f(xs):
        found = None
        for x in xs:
            if x > 1:
                found = x
                break
        else:
            found = -1
        return found

    code = f.__code__
    head = next(ins for ins in decode(code).instructions if ins.opname == "FOR_ITER")
    plan = resume.plan_graph_break(code, head.offset, 1)
    for xs in ([0, 5, 7], [0, 1], []):
        assert _break_and_resume(f, plan, [iter(xs)], {"found": None}) == f(xs)


def test_break_at_method_and_global_loads_that_push_null():
    class C:
        def m(self, v):
            return v + 1

    def f(c, v):
        a = c.m(v)
        b = _helper(a)
        return a, b

    code = f.__code__
    insns = decode(code).instructions
    attr = next(ins for ins in insns if ins.opname in ("LOAD_METHOD", "LOAD_ATTR"))
    plan = resume.plan_graph_break(code, attr.offset, 1)
    c = C()
    assert _break_and_resume(f, plan, [c], {"v": 4}) == f(c, 4)
    glob = next(ins for ins in insns if ins.opname == "LOAD_GLOBAL")
    plan = resume.plan_graph_break(code, glob.offset, 0)
    assert _break_and_resume(f, plan, [], {"a": 5}) == f(c, 4)


@pytest.mark.skipif(sys.version_info < (3, 12), reason="3.11 runs a comprehension in its own code object")
def test_break_inside_inlined_comprehension_with_unbound_saved_variable():
    # 3.12+ inline list comprehensions; the stack keeps the old value of `i` (NULL: unbound here).
    def f(xs):
        ys = [_helper(i) for i in xs]
        return ys, xs

    code = f.__code__
    call = _call_offset(f, 0)
    plan = resume.plan_graph_break(code, call, stack_depth_at(code, call))
    it = iter([2, 3])
    call_part = [NULL, _helper, 1] if versions.CALL_STYLE == "null_first" else [_helper, NULL, 1]
    stack = [NULL, [], it] + call_part  # saved i, the (empty) list so far, the iterator, the call
    assert plan.stack_depth == len(stack)
    assert _break_and_resume(f, plan, stack, {"xs": [1, 2, 3], "i": 1}) == f([1, 2, 3])


@pytest.mark.skipif(sys.version_info < (3, 13), reason="TO_BOOL exists from 3.13")
def test_break_at_to_bool():
    def f(x):
        if x:
            return "yes"
        return "no"

    code = f.__code__
    to_bool = _offset_of(f, "TO_BOOL")
    plan = resume.plan_graph_break(code, to_bool, 1)
    assert len(plan.successors) == 1
    assert _break_and_resume(f, plan, [[0]], {}) == "yes"
    assert _break_and_resume(f, plan, [[]], {}) == "no"


def test_resume_in_function_needing_extended_arg():
    # 270 locals: local indices and jump arguments need EXTENDED_ARG in the resume function too.
    n = 270
    src = ["def big(x, reps):"]
    src += [f"    v{i} = x + {i}" for i in range(n)]
    src += ["    acc = 0", "    for r in range(reps):", f"        acc += v{n - 1} - v0 + r", "    return acc + v3"]
    ns = {}
    exec(compile("\n".join(src), "<big>", "exec"), ns)
    big = ns["big"]
    code = big.__code__
    assert dis.opmap["EXTENDED_ARG"] in code.co_code[::2]
    head = next(ins for ins in decode(code).instructions if ins.opname == "FOR_ITER")
    succ = Successor(head.offset, 1, live_locals_at(code, head.offset))
    assert set(succ.live_locals) == {"v0", "v3", f"v{n - 1}", "acc"}
    cont = resume.make_resume_function(code, succ, ns)
    env = {f"v{i}": 5 + i for i in range(n)}
    env["acc"] = 0
    assert cont(iter(range(4)), *[env[k] for k in succ.live_locals]) == big(5, 4)
    # dis reports an instruction with an EXTENDED_ARG prefix at its opcode: plans accept that offset
    load = next(i for i in dis.get_instructions(code) if i.opname.startswith("LOAD_FAST") and i.argval == "acc")
    assert load.arg > 255
    plan = resume.plan_graph_break(code, load.offset, stack_depth_at(code, load.offset))
    assert plan.offset == load.offset - 2  # the prefix's offset
    env["acc"] = 1
    got = _break_and_resume(big, plan, [iter(range(1, 4))], {**env, "r": 0})  # iteration r=0 under way
    assert got == big(5, 4) + 1
    # and resuming before the first assignment needs every v_i again: none are live yet
    first = decode(code).instructions[1].offset
    cont = resume.make_resume_function(code, Successor(first, 0, live_locals_at(code, first)), ns)
    assert cont(*[{"x": 5, "reps": 4}[k] for k in live_locals_at(code, first)]) == big(5, 4)


def test_cells_shared_with_earlier_closures_refuse_a_continuation():
    # Continuations take cell *values*; a closure made before the break keeps the old cell, so a
    # later assignment on either side would be lost: plan_graph_break refuses (the frame runs eagerly).
    def reassigned(x):
        k = 1

        def g():
            return k

        y = x + 1  # the break
        k = 2
        return g(), y

    def nonlocal_write(x):
        count = 0

        def inc():
            nonlocal count
            count += 1

        inc()
        y = x + 1  # the break
        inc()
        return count, y

    for f in (reassigned, nonlocal_write):
        with pytest.raises(CannotResume, match="shared with a closure"):
            resume.plan_graph_break(f.__code__, _offset_of(f, "BINARY_OP"), 2)

    def read_only(x):
        k = x * 2

        def g(v):
            return v + k

        y = x + 1  # the break: k is never assigned again, so a copy of its value is enough
        return g(y), k

    code = read_only.__code__
    plan = resume.plan_graph_break(code, _offset_of(read_only, "BINARY_OP", 1), 2)
    assert set(plan.live_locals) == {"g", "k"}
    inner = next(c for c in code.co_consts if isinstance(c, types.CodeType))
    g = types.FunctionType(inner, read_only.__globals__, "g", None, (types.CellType(10),))
    assert _break_and_resume(read_only, plan, [5, 1], {"g": g, "k": 10}) == read_only(5) == (16, 10)

    def loop_captures(xs):
        fs = []
        for x in xs:
            fs.append(lambda: x)  # a capture in an earlier iteration reaches the break
            y = x + 1  # the break: x is assigned again in the next iteration
        return [f() for f in fs], y

    with pytest.raises(CannotResume, match="'x'"):
        resume.plan_graph_break(loop_captures.__code__, _offset_of(loop_captures, "BINARY_OP"), 3)


class Recorder:
    def __init__(self):
        self.log = []

    def __enter__(self):
        self.log.append("enter")
        return self

    def __exit__(self, kind, value, tb):
        self.log.append(("exit", kind.__name__ if kind else None))
        return kind is KeyError


def _raise_if(v):
    if v < 0:
        raise KeyError(v)
    if v == 0:
        raise ValueError(v)
    return v * 2


@pytest.mark.parametrize("v", [3, -1, 0])
def test_break_at_call_inside_with_that_raises(v):
    # The call runs natively inside the copied with block: an exception reaches __exit__, which
    # swallows KeyError; ValueError propagates as it would without compiling.
    def f(rec, v):
        r = -100
        with rec:
            r = _raise_if(v)
            rec.log.append("after")
        return r, rec.log

    code = f.__code__
    call = _call_offset(f, 0)
    plan = resume.plan_graph_break(code, call, stack_depth_at(code, call))

    def run(runner):
        rec = Recorder()
        try:
            return runner(rec)
        except ValueError:
            return "ValueError", rec.log

    def compiled(rec):
        rec.__enter__()
        call_part = [NULL, _raise_if, v] if versions.CALL_STYLE == "null_first" else [_raise_if, NULL, v]
        return _break_and_resume(f, plan, [rec.__exit__] + call_part, {"rec": rec, "r": -100})

    assert run(compiled) == run(lambda rec: f(rec, v))


def test_break_at_before_with_enters_natively():
    def f(rec, v):
        with rec as r:
            if v:
                raise KeyError(v)
            r.log.append("body")
        return rec.log

    code = f.__code__
    before = _offset_of(f, "BEFORE_WITH")
    plan = resume.plan_graph_break(code, before, 1)
    for v in (0, 1):
        rec = Recorder()
        assert _break_and_resume(f, plan, [rec], {"rec": rec, "v": v}) == f(Recorder(), v)


def test_break_at_call_function_ex():
    def f(args, kw):
        r = _helper(*args, **kw)
        return r + 1

    code = f.__code__
    call = _offset_of(f, "CALL_FUNCTION_EX")
    plan = resume.plan_graph_break(code, call, stack_depth_at(code, call))
    args, kw = (1, 2), {"c": 3}
    if versions.CALL_STYLE == "null_first":
        stack = [NULL, _helper, args, kw]
    else:
        stack = [_helper, NULL, args, kw]
    assert plan.stack_depth == len(stack)
    assert _break_and_resume(f, plan, stack, {}) == f(args, kw)


def test_resume_of_a_resume_function():
    # The runtime compiles resume functions, so they break and resume again: a chain of copies.
    def f(xs, k):
        total = 0
        for x in xs:
            total += _helper(x, k)
        return total

    code = f.__code__
    head = next(ins for ins in decode(code).instructions if ins.opname == "FOR_ITER")
    succ = Successor(head.offset, 1, live_locals_at(code, head.offset))
    r1 = resume.make_resume_function(code, succ, f.__globals__)
    # inside r1, break at the call to _helper and continue in a resume function of r1's code
    c1 = r1.__code__
    call = _call_offset(r1, 0)
    plan = resume.plan_graph_break(c1, call, stack_depth_at(c1, call))
    assert plan.code is c1
    it = iter([2, 3])
    x = 1
    call_part = [NULL, _helper, x, 5] if versions.CALL_STYLE == "null_first" else [_helper, NULL, x, 5]
    env = {"total": 7, "k": 5, "x": x, "___stack0": NULL}
    got = _break_and_resume(r1, plan, [it, 7] + call_part, env)
    assert got == 7 + _helper(1, 5) + _helper(2, 5) + _helper(3, 5)


def test_zero_argument_super_in_continuations():
    fn = SuperChild.m
    code = fn.__code__
    expected = fn(SuperChild(), 3)
    # resume at statement boundaries: `self` must be live and in slot 0
    insns = decode(code).instructions
    for store in [ins for ins in insns if ins.opname == "STORE_FAST"][:2]:
        nxt = insns[insns.index(store) + 1]
        succ = Successor(nxt.offset, 0, live_locals_at(code, nxt.offset))
        assert "self" in succ.live_locals
        cont = resume.make_resume_function(code, succ, fn.__globals__, fn.__closure__)
        env = {"self": SuperChild(), "v": 3, "y": 6, "z": 7}
        assert cont(*[env[n] for n in succ.live_locals]) == expected
    # a break at the bare super() call, with values below it on the stack: slot 0 is swapped
    call = [ins for ins in dis.get_instructions(fn) if ins.opname == "CALL" and ins.arg == 0][-1].offset
    plan = resume.plan_graph_break(code, call, stack_depth_at(code, call))
    call_part = [NULL, super] if versions.CALL_STYLE == "null_first" else [super, NULL]
    stack = [7] + call_part
    assert plan.stack_depth == len(stack)
    self = SuperChild()
    got = _break_and_resume(fn, plan, stack, {"self": self, "z": 7})
    assert got == expected


def test_generated_instructions_have_lines_in_tracebacks():
    # An exception raised by the resume function passes through the break function's stub; every
    # frame of the traceback must have a line number (pytest's formatting needs one).
    def f(v):
        y = _helper(v)
        return 10 // (y - y)

    code = f.__code__
    call = _call_offset(f, 0)
    plan = resume.plan_graph_break(code, call, stack_depth_at(code, call))
    call_part = [NULL, _helper, 1] if versions.CALL_STYLE == "null_first" else [_helper, NULL, 1]
    with pytest.raises(ZeroDivisionError) as info:
        _break_and_resume(f, plan, call_part, {})
    tb = info.value.__traceback__
    lines = []
    while tb is not None:
        lines.append((tb.tb_frame.f_code.co_name, tb.tb_lineno))
        tb = tb.tb_next
    names = [f"f__break_at_{plan.offset}", f"f__resume_at_{plan.successors[0].offset}"]
    assert [name for name, _ in lines[-2:]] == names
    first_line = code.co_firstlineno
    assert all(isinstance(line, int) and line >= first_line for _, line in lines[-2:]), lines
    assert lines[-1][1] == first_line + 2  # the division's own line in the resume function


class BadBool:
    def __bool__(self):
        raise ValueError("no truth value")


def test_break_at_conditional_jump_whose_condition_raises_inside_try():
    def f(c):
        try:
            if c:
                return "yes"
            return "no"
        except ValueError:
            return "bad"

    code = f.__code__
    jump = next(ins for ins in decode(code).instructions if ins.opcode in versions.CONDITIONAL_JUMPS)
    plan = resume.plan_graph_break(code, jump.offset, stack_depth_at(code, jump.offset))
    assert _break_and_resume(f, plan, [BadBool()], {}) == f(BadBool()) == "bad"
    assert _break_and_resume(f, plan, [Truthy(0)], {}) == "no"
