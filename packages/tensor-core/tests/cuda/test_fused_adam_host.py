"""Host-side logic of the CUDA fused Adam step, without a GPU (these tests run on every machine).

``ember.cuda.kernels.optim_kernels.fused_adam_`` passes each launch's table of pointers and running sizes by
value, and ``ember.optim.adam`` increments the step counters itself. Here CuPy is replaced by a stand-in whose
arrays are numpy arrays (their device addresses are the numpy data addresses) and whose kernel runs the update
in numpy from the table it is given, so the table's layout, the launch split and grouping and the step counters
are checked against the CPU single-tensor loop and against ``ember._foreach_add_``.
"""

import contextlib
import re

import numpy as np
import pytest

import ember
from ember._tensor import Tensor
from ember.cuda import _runtime
from ember.cuda.kernels import optim_kernels
from ember.optim import adam as adam_module

_EDTYPE = {np.float32: ember.float32, np.float64: ember.float64}
_STORAGE = {"float": np.float32, "double": np.float64, "f16": np.float16}
_ACC = {"float": np.float32, "double": np.float64}


class FakeArray:
    """What the fused step reads of a CuPy array, over a numpy array (its address is the numpy data address)."""

    def __init__(self, host):
        self.host = host
        _MEMORY[host.ctypes.data] = host

    dtype = property(lambda self: self.host.dtype)
    shape = property(lambda self: self.host.shape)
    size = property(lambda self: self.host.size)
    _c_contiguous = property(lambda self: self.host.flags.c_contiguous)

    @property
    def data(self):
        return type("Pointer", (), {"ptr": self.host.ctypes.data})()

    def reshape(self, *shape):
        return FakeArray(self.host.reshape(*shape))

    def view(self, dtype):
        return FakeArray(self.host.view(dtype))


_MEMORY = {}  # address -> a numpy array starting there


class FakeKernel:
    """The fused Adam kernel run in numpy, reading the pointers and sizes from its by-value table argument."""

    def __init__(self, code, name, cupy):
        defines = dict(re.findall(r"#define (\w+) (\S+)", code))
        self.storage, self.acc = _STORAGE[defines["T"]], _ACC[defines["A"]]
        self.max_tensors = int(defines["MAX_TENSORS"])
        self.cupy = cupy

    def __call__(self, grid, block, args):
        table, n, total, lr, beta1, beta2, wd, eps_term, step_size, flags = args
        nbytes = 8 * (6 * self.max_tensors + 1)
        assert nbytes + 4 * 8 + 6 * 8 <= 4096  # CUDA's limit on a launch's arguments
        # CuPy passes a numpy array of one element by value: its bytes are the kernel's ``Table``
        assert isinstance(table, np.ndarray) and table.size == 1 and table.itemsize == nbytes
        w = table.view(np.uint64)
        n, total = int(n), int(total)
        offsets = w[5 * n: 6 * n + 1].astype(np.int64)
        assert offsets[0] == 0 and offsets[-1] == total and 0 < n <= self.max_tensors
        assert grid == ((total + optim_kernels._CHUNK - 1) // optim_kernels._CHUNK,)
        self.cupy.launches.append((n, total))
        acc = self.acc
        amsgrad, maximize, decoupled = flags & 1, flags & 2, flags & 4
        for k in range(n):
            size = offsets[k + 1] - offsets[k]
            p, g, m, v = (_MEMORY[int(w[c * n + k])].reshape(-1).view(self.storage) for c in range(4))
            assert p.size == g.size == m.size == v.size == size
            gv = -g.astype(acc) if maximize else g.astype(acc)
            pv = p.astype(acc)
            if wd != 0:
                if decoupled:
                    pv = pv * acc(1.0 - lr * wd)
                else:
                    gv = gv + acc(wd) * pv
            mv = m.astype(acc)
            mv = mv + acc(1.0 - beta1) * (gv - mv)
            vv = v.astype(acc)
            vv = vv + acc(1.0 - beta2) * (gv * gv - vv)
            if amsgrad:
                vm = _MEMORY[int(w[4 * n + k])].reshape(-1).view(self.storage)
                mx = np.maximum(vm.astype(acc), vv)
                vm[...] = mx
                den = np.sqrt(mx) + acc(eps_term)
            else:
                den = np.sqrt(vv) + acc(eps_term)
            p[...] = pv - acc(step_size) * mv / den
            m[...] = mv
            v[...] = vv


class FakeCupy:
    """The parts of the ``cupy`` module the fused step uses."""

    ndarray = FakeArray

    def __init__(self):
        self.launches = []
        self.cuda = type("cuda", (), {"Device": staticmethod(lambda index: contextlib.nullcontext())})

    def RawKernel(self, code, name):  # noqa: N802 - CuPy's name
        return FakeKernel(code, name, self)


@pytest.fixture
def fake_cupy(monkeypatch):
    fake = FakeCupy()
    monkeypatch.setattr(_runtime, "_state", {"cupy": fake, "reason": None})
    monkeypatch.setattr(optim_kernels, "_kernels", {})  # no stand-in kernel outlives the test
    _MEMORY.clear()
    yield fake
    _MEMORY.clear()


def _on_fake_gpu(t):
    """A plain tensor on "cuda" holding a stand-in CuPy array of ``t``'s values."""
    return Tensor._make(FakeArray(np.array(t.numpy(), copy=True)), ember.device("cuda"))


def _values(t):
    return t._data.host if isinstance(t._data, FakeArray) else t.numpy()


def _tensors(shapes, dtype, seed):
    rng = np.random.default_rng(seed)
    return [ember.tensor(rng.standard_normal(s).astype(dtype)) for s in shapes]


def _run(shapes, dtype, steps, kwargs, on_gpu, first_step=0.0):
    """Parameters and state after ``steps`` calls of ``adam()`` (the fused stand-in on "cuda", else the CPU
    single-tensor loop), gradients freshly made at each step as a training loop makes them."""
    amsgrad = kwargs.get("amsgrad", False)
    move = _on_fake_gpu if on_gpu else (lambda t: t)
    params = [move(t) for t in _tensors(shapes, dtype, 0)]
    state = [[move(ember.zeros(s, dtype=_EDTYPE[dtype])) for s in shapes] for _ in range(3 if amsgrad else 2)]
    counters = [ember.tensor(first_step, dtype=ember.float32) for _ in shapes]
    for k in range(steps):
        grads = [move(t) for t in _tensors(shapes, dtype, 100 + k)]
        adam_module.adam(
            params, grads, state[0], state[1], state[2] if amsgrad else [], counters,
            foreach=False if not on_gpu else None, beta1=kwargs.get("betas", (0.9, 0.999))[0],
            beta2=kwargs.get("betas", (0.9, 0.999))[1], lr=kwargs.get("lr", 0.01),
            weight_decay=kwargs.get("weight_decay", 0.0), eps=1e-8, amsgrad=amsgrad,
            maximize=kwargs.get("maximize", False),
            decoupled_weight_decay=kwargs.get("decoupled_weight_decay", False),
        )
    return params, state, counters


CASES = [
    {}, {"weight_decay": 0.1}, {"amsgrad": True}, {"maximize": True, "weight_decay": 0.01},
    {"decoupled_weight_decay": True, "weight_decay": 0.1, "amsgrad": True, "betas": (0.8, 0.99)},
]


@pytest.mark.parametrize("kwargs", CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fused_step_from_by_value_table_matches_cpu_loop(fake_cupy, kwargs, dtype):
    shapes = [(32, 1, 3, 3), (32,), (0,), (64, 32, 3, 3), (64,), (10, 4096), (10,)]
    assert adam_module._default_impl([_on_fake_gpu(t) for t in _tensors(shapes, dtype, 0)], False) is (
        adam_module._fused_adam)
    gpu_params, gpu_state, gpu_steps = _run(shapes, dtype, 3, kwargs, on_gpu=True)
    cpu_params, cpu_state, cpu_steps = _run(shapes, dtype, 3, kwargs, on_gpu=False)
    tol = {np.float32: dict(rtol=2e-5, atol=2e-6), np.float64: dict(rtol=1e-11, atol=1e-12)}[dtype]
    for got, want in zip(gpu_params + sum(gpu_state, []), cpu_params + sum(cpu_state, [])):
        np.testing.assert_allclose(_values(got), _values(want), **tol)
    assert [float(s) for s in gpu_steps] == [float(s) for s in cpu_steps] == [3.0] * len(shapes)
    assert fake_cupy.launches == [(len(shapes), sum(int(np.prod(s)) for s in shapes))] * 3  # one launch a step


def test_many_tensors_take_one_launch_per_table(fake_cupy):
    count = 2 * optim_kernels._MAX_TENSORS + 5
    shapes = [(i % 7 + 1,) for i in range(count)]
    gpu_params, _, _ = _run(shapes, np.float32, 2, {}, on_gpu=True)
    cpu_params, _, _ = _run(shapes, np.float32, 2, {}, on_gpu=False)
    for got, want in zip(gpu_params, cpu_params):
        np.testing.assert_allclose(_values(got), _values(want), rtol=2e-5, atol=2e-6)
    per_step = [n for n, _ in fake_cupy.launches[:3]]
    assert per_step == [optim_kernels._MAX_TENSORS, optim_kernels._MAX_TENSORS, 5]
    assert len(fake_cupy.launches) == 6


def test_groups_by_dtype_and_step(fake_cupy):
    a = [_on_fake_gpu(t) for t in _tensors([(5,), (6,)], np.float32, 0)]
    b = [_on_fake_gpu(t) for t in _tensors([(7,)], np.float64, 1)]
    params = [a[0], b[0], a[1]]
    grads = [_on_fake_gpu(ember.ones(p.shape, dtype=p.dtype)) for p in params]
    moments = [[_on_fake_gpu(ember.zeros(p.shape, dtype=p.dtype)) for p in params] for _ in range(2)]
    counters = [ember.tensor(0.0), ember.tensor(0.0), ember.tensor(4.0)]  # the last has taken 4 steps
    adam_module._fused_adam(params, grads, moments[0], moments[1], [], counters, amsgrad=False, beta1=0.9,
                            beta2=0.999, lr=0.1, weight_decay=0.0, eps=1e-8, maximize=False,
                            decoupled_weight_decay=False, differentiable=False)
    assert fake_cupy.launches == [(1, 5), (1, 7), (1, 6)]  # (float32, 1), (float64, 1), (float32, 5)
    assert [float(c) for c in counters] == [1.0, 1.0, 5.0]
    # step 1 of Adam moves every element by lr (the gradient is 1); step 5 by lr * sqrt(1 - b2^5) / (1 - b1^5)
    np.testing.assert_allclose(_values(params[0]), _tensors([(5,)], np.float32, 0)[0].numpy() - 0.1, rtol=1e-5, atol=1e-6)
    bc = 0.1 * (1 - 0.999**5) ** 0.5 / (1 - 0.9**5)
    m, v = 1 - 0.9, 1 - 0.999
    expected = _tensors([(5,), (6,)], np.float32, 0)[1].numpy() - bc * m / (np.sqrt(v) + 1e-8 * (1 - 0.999**5) ** 0.5)
    np.testing.assert_allclose(_values(params[2]), expected, rtol=1e-5, atol=1e-6)


def test_pack_table_layout():
    arrays = [[FakeArray(np.zeros(s, np.float32)) for s in (3, 0, 5)] for _ in range(4)]
    table, total = optim_kernels._pack_table((*arrays, [None] * 3), [0, 1, 2])
    w = table.view(np.uint64)
    assert total == 8 and table.shape == (1,) and w.size == 6 * optim_kernels._MAX_TENSORS + 1
    for c in range(4):
        assert list(w[3 * c: 3 * c + 3]) == [a.data.ptr for a in arrays[c]]
    assert list(w[12:15]) == [0, 0, 0]  # no AMSGrad column
    assert list(w[15:19]) == [0, 3, 3, 8]
    assert not w[19:].any()
    _MEMORY.clear()


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64])
@pytest.mark.parametrize("start", [0.0, 2.0**24 - 2, 2.0**24, 2.0**53, float("inf"), float("nan")])
def test_increment_steps_matches_foreach_add(dtype, start):
    mine = [ember.tensor(start, dtype=dtype) for _ in range(3)]
    theirs = [ember.tensor(start, dtype=dtype) for _ in range(3)]
    versions = [t._version for t in mine]
    for _ in range(3):
        values = adam_module._increment_steps(mine)
        ember._foreach_add_(theirs, 1)
        assert all(type(v) is float for v in values)
        np.testing.assert_array_equal(values, [t.item() for t in theirs])
    for a, b in zip(mine, theirs):
        assert a.dtype == b.dtype and a.numpy().tobytes() == b.numpy().tobytes()
    assert [t._version for t in mine] == [v + 3 for v in versions]


def test_increment_steps_repeated_and_other_counters():
    shared = ember.tensor(0.0)
    other = ember.tensor(0, dtype=ember.int64)  # not a float counter: the list op adds 1
    needs_grad = ember.tensor(0.0, requires_grad=True)
    assert adam_module._increment_steps([shared, other, shared]) == [2.0, 1, 2.0]  # values read after both
    assert other.dtype == ember.int64
    with ember.no_grad():
        assert adam_module._increment_steps([needs_grad]) == [1.0]
    with pytest.raises(RuntimeError):  # the list op's own error for an in-place op on a leaf that requires grad
        adam_module._increment_steps([needs_grad])
