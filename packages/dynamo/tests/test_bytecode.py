"""ember._dynamo.bytecode: decode -> assemble round trips, edits, and the stack/liveness analyses.

These tests use only the standard library modules of the bytecode package, so they also run on
a bare 3.12/3.13 interpreter without an ember build (see the import fallback below).
"""

from __future__ import annotations

import collections
import dis
import functools
import inspect
import json.decoder
import json.encoder
import os.path
import sys
import textwrap
import types

import pytest

try:
    from ember._dynamo import bytecode as bc
except ImportError:  # a bare interpreter: load the stdlib-only modules straight from the source tree
    _SRC = os.path.join(os.path.dirname(__file__), "..", "src", "ember")
    for _name, _path in (("ember", _SRC), ("ember._dynamo", os.path.join(_SRC, "_dynamo"))):
        _mod = types.ModuleType(_name)
        _mod.__path__ = [_path]
        sys.modules[_name] = _mod
    from ember._dynamo import bytecode as bc

from ember._dynamo.bytecode import analysis, versions  # noqa: E402
from ember._dynamo.bytecode.assemble import encode_location_table  # noqa: E402
from ember._dynamo.bytecode.instructions import Instruction  # noqa: E402


def _stdlib_functions():
    out = []
    for mod in (json.decoder, json.encoder, os.path, textwrap, collections, functools, inspect, dis):
        for obj in vars(mod).values():
            if inspect.isfunction(obj):
                cands = [obj]
            elif inspect.isclass(obj):
                cands = [m for m in vars(obj).values() if inspect.isfunction(m)]
            else:
                cands = []
            out += [f for f in cands if f.__module__ == mod.__name__]
    return out


STDLIB = _stdlib_functions()


def _roundtrip(code):
    dec = bc.decode(code)
    return bc.assemble(dec.instructions, dec.exception_table, template=code)


def test_stdlib_round_trip_is_byte_identical():
    # Hundreds of real functions (loops, try/finally, with, comprehensions, closures, generators):
    # decoding and assembling again gives the compiler's own bytes, tables and stack size.
    assert len(STDLIB) > 300
    for fn in STDLIB:
        code = fn.__code__
        new = _roundtrip(code)
        assert new.co_code == code.co_code, fn.__qualname__
        assert new.co_exceptiontable == code.co_exceptiontable, fn.__qualname__
        assert list(new.co_positions()) == list(code.co_positions()), fn.__qualname__
        assert new.co_stacksize == code.co_stacksize, fn.__qualname__


def test_decoded_jump_targets_match_dis():
    for fn in STDLIB[:150]:
        dec = bc.decode(fn.__code__)
        ours = {ins.offset: ins.target.offset for ins in dec.instructions if ins.target is not None}
        theirs = {i.offset: i.argval for i in dis.get_instructions(fn.__code__) if i.opcode in versions._JUMPS}
        # dis reports the opcode's own offset; ours is the first EXTENDED_ARG's, so compare targets.
        assert sorted(ours.values()) == sorted(theirs.values()), fn.__qualname__


def test_exception_table_parse_matches_dis():
    parse = getattr(dis, "_parse_exception_table", None)
    if parse is None:
        pytest.skip("dis._parse_exception_table is not available on this Python")
    for fn in STDLIB[:200]:
        theirs = [(e.start, e.end, e.target, e.depth, e.lasti) for e in parse(fn.__code__)]
        assert bc.instructions.parse_exception_table(fn.__code__) == theirs


# --- behaviour after edits ---------------------------------------------------------------------
def _loops(n):
    total = 0
    for i in range(n):
        if i % 3 == 0:
            continue
        j = 0
        while j < i:
            total += j
            j += 2
        if total > 1000:
            break
    else:
        total = -total
    return total


def _exceptions(xs):
    out = []
    for x in xs:
        try:
            try:
                out.append(10 // x)
            finally:
                out.append("f")
        except ZeroDivisionError as e:
            out.append(type(e).__name__)
        except TypeError:
            out.append("type")
            continue
        else:
            out.append("else")
    return out


class _Ctx:
    def __init__(self, log):
        self.log = log

    def __enter__(self):
        self.log.append("enter")
        return self

    def __exit__(self, *exc):
        self.log.append(("exit", exc[0].__name__ if exc[0] else None))
        return exc[0] is KeyError


def _with_blocks(x):
    log = []
    with _Ctx(log):
        log.append(x)
    with _Ctx(log) as c:
        if x > 1:
            raise KeyError(x)
        c.log.append("body")
    try:
        with _Ctx(log):
            raise ValueError(x)
    except ValueError:
        log.append("caught")
    return log


def _comprehensions(n):
    a = [i * i for i in range(n) if i % 2]
    b = {i: str(i) for i in range(n)}
    c = {i % 3 for i in range(n)}
    d = sum(x for x in range(n))
    return a, b, c, d, [[j for j in range(i)] for i in range(n)]


def _closures(n):
    acc = []

    def add(v):
        acc.append(v + n)
        return len(acc)

    k = n

    def bump():
        nonlocal k
        k += 1
        return k

    return [add(i) for i in range(3)], bump(), bump(), acc, k


def _gen(n):
    for i in range(n):
        yield i * 2
    yield from range(3)


def _kwargs(*args, **kwargs):
    extra = dict(a=1, **kwargs)
    return sorted(kwargs.items(), key=lambda kv: kv[0]), args, max(args, default=0), extra


BEHAVIOUR = [
    (_loops, (20,)),
    (_loops, (200,)),
    (_exceptions, ([1, 0, "a", 5],)),
    (_with_blocks, (1,)),
    (_with_blocks, (5,)),
    (_comprehensions, (7,)),
    (_closures, (4,)),
    (_kwargs, (3, 1, 2)),
    (lambda *a, **k: _kwargs(*a, **k), (1,)),
]


def _with_nops(code):
    """The same code with a NOP inserted before every instruction that allows one."""
    dec = bc.decode(code)
    out = []
    skip = 0
    targets = {id(ins.target) for ins in dec.instructions if ins.opname == "FOR_ITER"}
    fixed = {"MAKE_CELL", "COPY_FREE_VARS", "RETURN_GENERATOR", "RESUME"}  # frame set-up; RESUME follows YIELD_VALUE
    for k, ins in enumerate(dec.instructions):
        after_setup = k > 0 and dec.instructions[k - 1].opname == "RETURN_GENERATOR"
        glued = ins.opcode in versions.GLUED_TO_PREVIOUS
        if skip == 0 and ins.opname not in fixed and not after_setup and not glued:
            out.append(Instruction.make("NOP", positions=ins.positions))
        skip = max(0, skip - 1)
        if id(ins) in targets:  # the instructions a finished FOR_ITER skips stay adjacent
            skip = max(0, versions.FOR_ITER_EXIT_SKIP - 1)
        out.append(ins)
    return bc.assemble(out, dec.exception_table, template=code)


def _run(fn, code, args):
    clone = types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    clone.__kwdefaults__ = fn.__kwdefaults__
    return clone(*args)


@pytest.mark.parametrize("fn,args", BEHAVIOUR, ids=lambda v: getattr(v, "__name__", None))
def test_round_trip_behaviour(fn, args):
    code = fn.__code__
    assert _run(fn, _roundtrip(code), args) == fn(*args)


@pytest.mark.parametrize("fn,args", BEHAVIOUR, ids=lambda v: getattr(v, "__name__", None))
def test_behaviour_with_inserted_nops(fn, args):
    # Every jump and exception-table entry must follow its instruction when the layout moves.
    code = _with_nops(fn.__code__)
    assert len(code.co_code) > len(fn.__code__.co_code)
    assert _run(fn, code, args) == fn(*args)


def test_generator_round_trip_with_nops():
    code = _with_nops(_gen.__code__)
    assert list(_run(_gen, code, (4,))) == list(_gen(4))


def test_nested_code_objects_round_trip():
    # The comprehension/closure code objects inside a function round-trip too.
    for fn in (_comprehensions, _closures, _with_blocks):
        for const in fn.__code__.co_consts:
            if isinstance(const, types.CodeType):
                new = _roundtrip(const)
                assert new.co_code == const.co_code
                assert new.co_exceptiontable == const.co_exceptiontable


def _big_function_source(n_vars=300, n_branches=40):
    lines = ["def big(x):"]
    for i in range(n_vars):
        lines.append(f"    v{i} = x + {i * 7 + 1000}")
    lines.append("    total = 0")
    lines.append("    for k in range(3):")
    for b in range(n_branches):
        lines.append(f"        if (x + k) % {b + 2} == 0:")
        lines.append(f"            total += v{(b * 7) % n_vars} + k")
        lines.append("        else:")
        lines.append(f"            total -= v{(b * 11) % n_vars}")
        lines.append("        try:")
        lines.append(f"            total += 1 // ((x + {b}) % 3)")
        lines.append("        except ZeroDivisionError:")
        lines.append("            total += 5")
    lines.append("    return total + " + " + ".join(f"v{i}" for i in range(0, n_vars, 13)))
    return "\n".join(lines)


def test_extended_arg_function():
    ns = {}
    exec(compile(_big_function_source(), "<big>", "exec"), ns)
    big = ns["big"]
    raw = big.__code__.co_code
    assert dis.opmap["EXTENDED_ARG"] in raw[::2]  # really needs EXTENDED_ARG (locals > 255, long jumps)
    new = _roundtrip(big.__code__)
    assert new.co_code == raw
    assert new.co_exceptiontable == big.__code__.co_exceptiontable
    nops = _with_nops(big.__code__)
    for x in (0, 1, 7, 12):
        assert _run(big, new, (x,)) == big(x)
        assert _run(big, nops, (x,)) == big(x)


def test_jump_arg_growing_past_255_gets_extended_arg():
    # A short forward jump stretched by 600 NOPs needs an EXTENDED_ARG prefix afterwards.
    def f(x):
        if x:
            return 1
        return 2

    dec = bc.decode(f.__code__)
    i = next(k for k, ins in enumerate(dec.instructions) if versions.is_jump(ins.opcode))
    pad = [Instruction.make("NOP") for _ in range(600)]
    body = dec.instructions[: i + 1] + pad + dec.instructions[i + 1 :]
    code = bc.assemble(body, dec.exception_table, template=f.__code__)
    assert code.co_code[::2].count(dis.opmap["EXTENDED_ARG"]) >= 1
    assert _run(f, code, (1,)) == 1
    assert _run(f, code, (0,)) == 2


def test_assemble_rejects_unknown_local():
    def f(x):
        return x

    dec = bc.decode(f.__code__)
    for ins in dec.instructions:
        if ins.opname.startswith("LOAD_FAST"):
            ins.argval = "nope"
    with pytest.raises(ValueError, match="nope"):
        bc.assemble(dec.instructions, dec.exception_table, template=f.__code__)


# --- analyses --------------------------------------------------------------------------------
def _simple(a, b):
    c = a + b
    if c > 0:
        d = c * 2
    else:
        d = -c
    return d + a


def test_stack_depth_at_matches_dis_stack_effect_walk():
    # Depth before each instruction + its effect == depth before the next (straight-line code).
    code = _simple.__code__
    dec = bc.decode(code)
    for ins, nxt in zip(dec.instructions, dec.instructions[1:]):
        if ins.opcode in versions.TERMINATORS or versions.is_jump(ins.opcode):
            continue
        before = bc.stack_depth_at(code, ins.offset)
        assert bc.stack_depth_at(code, nxt.offset) == before + versions.stack_effect(ins.opcode, ins.arg, False)


def test_stack_depth_inside_loops_and_with():
    def f(xs):
        for x in xs:  # the iterator is on the stack inside the loop
            with open(os.devnull) as fh:  # and __exit__ inside the with block
                fh.read(x)

    code = f.__code__
    dec = bc.decode(code)
    read_at = next(i.offset for i in dis.get_instructions(code) if i.argval == "read")
    read = dec.at(read_at)
    store_x = next(ins for ins in dec.instructions if ins.opname == "STORE_FAST" and ins.argval == "x")
    assert bc.stack_depth_at(code, store_x.offset) == 2  # iterator + the next item
    assert bc.stack_depth_at(code, read.offset) == 3  # iterator + __exit__ + fh


def test_stack_depth_at_bad_offset():
    with pytest.raises(ValueError, match="not the start of an instruction"):
        bc.stack_depth_at(_simple.__code__, 1)


def test_live_locals():
    code = _simple.__code__
    dec = bc.decode(code)
    first = dec.instructions[0].offset
    assert bc.live_locals_at(code, first) == ("a", "b")
    # before `if c > 0`: a (read at the end) and c are live, b is dead
    load_c = next(ins for ins in dec.instructions if ins.opname.startswith("LOAD_FAST") and ins.argval == "c")
    assert bc.live_locals_at(code, load_c.offset) == ("a", "c")
    ret = next(ins for ins in dec.instructions if ins.opname == "RETURN_VALUE")
    assert bc.live_locals_at(code, ret.offset) == ()


def test_live_locals_maybe_unbound_and_exception_handler():
    def f(x):
        if x:
            y = 1
        try:
            z = 10 // x
        except ZeroDivisionError:
            return y  # y and x are read in the handler
        return z

    code = f.__code__
    dec = bc.decode(code)
    div = next(ins for ins in dec.instructions if ins.opname == "BINARY_OP")
    # z is written after the division, so not live; y is live through the handler edge.
    assert set(bc.live_locals_at(code, div.offset)) == {"y"}
    assert "y" in bc.live_locals_at(code, dec.instructions[0].offset)


def test_live_locals_cells_not_free_vars():
    def outer(a):
        b = 2

        def inner():
            return a + b

        b = 3
        return inner

    code = outer.__code__
    dec = bc.decode(code)
    load_closure = [ins for ins in dec.instructions if ins.argval == "a" and "STORE" not in ins.opname][-1]
    assert "a" in bc.live_locals_at(code, load_closure.offset)
    inner = outer(1)
    assert bc.live_locals_at(inner.__code__, 0) == ()  # a, b are free variables of inner


def test_versions_table():
    assert versions.PY_VERSION in versions.SUPPORTED
    assert versions.cache_entries(dis.opmap["LOAD_GLOBAL"]) >= 4
    assert versions.is_backward_jump(dis.opmap["JUMP_BACKWARD"])
    assert not versions.is_backward_jump(dis.opmap["JUMP_FORWARD"])
    assert versions.flip_jump_direction(dis.opmap["JUMP_FORWARD"]) == dis.opmap["JUMP_BACKWARD"]
    assert versions.CALL_STYLE == ("null_first" if sys.version_info < (3, 13) else "callable_first")


def test_location_table_encoding_round_trips():
    # Encoding positions and decoding them with the interpreter gives them back (also None).
    def f(x):
        return x

    pos = [(5, 5, 4, 10), (6, 8, 0, 3), (None, None, None, None), (4, 4, None, None), (400, 400, 200, 260)]
    entries = [(1, p) for p in pos]
    table = encode_location_table(entries, firstlineno=3)
    code = f.__code__.replace(
        co_linetable=table, co_firstlineno=3, co_code=bytes([dis.opmap["NOP"], 0]) * len(pos), co_exceptiontable=b""
    )
    assert list(code.co_positions()) == pos


def test_analysis_of_stdlib_functions_runs():
    for fn in STDLIB[:200]:
        dec = bc.decode(fn.__code__)
        depths = analysis.stack_depths(dec.instructions, dec.exception_table)
        assert depths[0] == 0
        live = analysis.live_locals(dec.instructions, dec.exception_table)
        code = fn.__code__
        assert live[0] <= set(code.co_varnames) | set(code.co_cellvars) | set(code.co_freevars)
        _, cover = analysis._coverage(dec.instructions, dec.exception_table)
        returns = [i for i, ins in enumerate(dec.instructions) if ins.opname == "RETURN_VALUE" and i not in cover]
        assert all(live[i] == frozenset() for i in returns)


def test_module_imports_without_ember_runtime():
    # bytecode/ must stay standard-library only (the bare-interpreter tests rely on it).
    import ast

    root = os.path.dirname(bc.__file__)
    for fname in os.listdir(root):
        if fname.endswith(".py"):
            tree = ast.parse(open(os.path.join(root, fname)).read())
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.level == 0:
                    assert not (node.module or "").startswith("ember"), fname
                if isinstance(node, ast.Import):
                    assert not any(a.name.startswith("ember") for a in node.names), fname


assert textwrap  # used through STDLIB


def test_fused_local_ops_split_when_locals_move_past_15():
    # 3.13 fuses `v0 - v1`'s loads into LOAD_FAST_LOAD_FAST (two 4-bit indices); reversing the
    # locals moves them to 19 and 18, so the assembler must split the instruction in two.
    ns = {}
    body = "".join(f"    v{i} = {i * 3}\n" for i in range(20))
    exec(f"def f():\n{body}    return v0 - v1, [v2 for v2 in (v1, v0)]\n", ns)
    f = ns["f"]
    code = f.__code__
    dec = bc.decode(code)
    new = bc.assemble(dec.instructions, dec.exception_table, template=code, co_varnames=code.co_varnames[::-1])
    assert new.co_varnames[-1] == "v0"
    assert types.FunctionType(new, ns)() == f() == (-3, [3, 0])
