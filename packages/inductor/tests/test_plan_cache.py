"""The plan cache: a graph compiled once is loaded (plan + library) by a later compile, without lowering."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import ember
from ember._inductor import config
from ember._inductor.codegen import plan_cache
from ember._inductor.codegen.wrapper import compile_graph
from ember.fx.experimental.proxy_tensor import make_fx
from ember.testing import assert_close


def _fn(a, w):
    h = (a * 2).transpose(0, 1) @ w  # a strided extern argument
    return h.relu(), (a @ w).sum(), None


def _inputs():
    gen = ember.Generator().manual_seed(0)
    return ember.randn(3, 5, 8, generator=gen), ember.randn(8, 4, generator=gen)


def test_second_compile_loads_the_plan_without_lowering(fresh_cache):
    a, w = _inputs()
    gm = make_fx(_fn)(a, w)
    first = compile_graph(gm, [a, w])
    assert not callable(first._lowered)  # compiled: lowered now
    assert len(list((fresh_cache / "plans").glob("*.json"))) == 1
    second = compile_graph(make_fx(_fn)(a, w), [a, w])
    assert callable(second._lowered)  # loaded: not lowered
    assert second.source == first.source
    want = _fn(a, w)
    for got in (first(a, w), second(a, w)):
        assert_close(got[0], want[0])
        assert_close(got[1], want[1])
        assert got[2] is None
    assert str(second.scheduler) == str(first.scheduler)  # lowered on demand for introspection
    assert not callable(second._lowered)


def test_other_inputs_or_debugging_miss_the_cache(fresh_cache):
    a, w = _inputs()
    gm = make_fx(_fn)(a, w)
    assert plan_cache.key(gm, [a, w]) != plan_cache.key(gm, [a.double(), w.double()])
    assert plan_cache.key(gm, [a, w]) != plan_cache.key(gm, [a.transpose(0, 2).contiguous().transpose(0, 2), w])
    with config.patch(debug=True):
        assert plan_cache.key(gm, [a, w]) is None  # the stages must be written
    # settings that change the code: random ops lower in the kernels or stay eager calls; C++ flags
    base = plan_cache.key(gm, [a, w])
    for setting in ({"fallback_random": not config.fallback_random}, {"extra_cflags": ("-DX=1",)}, {"threads": 3}):
        with config.patch(**setting):
            assert plan_cache.key(gm, [a, w]) != base, setting
    with config.patch(fallback_on_compile_error=False):  # a stored plan compiled without an error
        assert plan_cache.key(gm, [a, w]) == base


def test_a_damaged_entry_is_a_miss(fresh_cache):
    a, w = _inputs()
    gm = make_fx(_fn)(a, w)
    compile_graph(gm, [a, w])
    for path in (fresh_cache / "plans").glob("*.json"):
        path.write_bytes(b"{not json")
    again = compile_graph(make_fx(_fn)(a, w), [a, w])
    assert not callable(again._lowered)
    assert_close(again(a, w)[0], _fn(a, w)[0])


def _masked(a):
    """A dropout-like mask: an extern (bernoulli) filling a fresh ``empty`` tensor (an EmptyArg in the plan)."""
    return (ember.bernoulli(ember.empty(a.shape), 0.5) * a,)


def test_a_warm_process_does_not_import_sympy(fresh_cache):
    code = textwrap.dedent(
        """
        import sys
        import ember
        from ember.fx.experimental.proxy_tensor import make_fx
        sys.path.insert(0, {here!r})
        from test_plan_cache import _fn, _inputs, _masked
        a, w = _inputs()
        gm = make_fx(_fn)(a, w)
        from ember._inductor.codegen.wrapper import compile_graph
        f = compile_graph(gm, [a, w])
        assert ember.allclose(f(a, w)[0], _fn(a, w)[0])
        (masked,) = compile_graph(make_fx(_masked)(a), [a])(a)
        assert ((masked == 0) | (masked == a)).all()
        print("sympy" in sys.modules)
        """
    ).format(here=os.path.dirname(__file__))
    env = dict(os.environ, EMBER_INDUCTOR_CACHE_DIR=str(fresh_cache))
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
            for _ in range(2)]
    for run in runs:
        assert run.returncode == 0, run.stderr[-2000:]
    assert [run.stdout.strip().splitlines()[-1] for run in runs] == ["True", "False"]


def test_a_reloaded_plan_runs_extern_kernels_that_check_dtypes(fresh_cache):
    # ember._C kernels compare numpy dtypes by identity: a plan read back from disk must hand them
    # the canonical dtype objects (an unpickled dtype was equal but not identical, and gather failed)
    def loss(logits, target):
        return (ember.nn.functional.cross_entropy(logits, target), ember.gather(logits, 1, target[:, None]))

    gen = ember.Generator().manual_seed(1)
    logits, target = ember.randn(6, 5, generator=gen), ember.tensor([0, 4, 2, 1, 3, 0])
    gm = make_fx(loss)(logits, target)
    compile_graph(gm, [logits, target])
    reloaded = compile_graph(make_fx(loss)(logits, target), [logits, target])
    assert callable(reloaded._lowered)  # loaded from disk
    for got, want in zip(reloaded(logits, target), loss(logits, target)):
        assert_close(got, want)


def test_the_stored_plan_is_json(fresh_cache):
    import json

    a, w = _inputs()
    compile_graph(make_fx(_fn)(a, w), [a, w])
    (path,) = (fresh_cache / "plans").glob("*.json")
    stored = json.loads(path.read_text())
    assert stored["format"] == plan_cache._FORMAT and "source" in stored
