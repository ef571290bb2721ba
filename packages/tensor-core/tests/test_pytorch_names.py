"""Names PyTorch programs import, without PyTorch: legacy tensor types, device predicates,
ember.accelerator, ember.backends, ember.nn.parallel and PyTorch's nn.modules paths.
(tests/parity/test_pytorch_names_parity.py compares the same APIs with PyTorch.)"""

import importlib
import typing
import warnings
from collections import OrderedDict

import numpy as np
import pytest

import ember
import ember.accelerator as acc
from ember import _device
from ember._extensions import MissingDistributionError
from ember.nn.modules import _paths
from ember.nn.modules.utils import consume_prefix_in_state_dict_if_present

LEGACY = {
    "FloatTensor": ember.float32,
    "DoubleTensor": ember.float64,
    "HalfTensor": ember.float16,
    "BFloat16Tensor": ember.bfloat16,
    "ByteTensor": ember.uint8,
    "CharTensor": ember.int8,
    "ShortTensor": ember.int16,
    "IntTensor": ember.int32,
    "LongTensor": ember.int64,
    "BoolTensor": ember.bool,
}

NO_CUDA = pytest.mark.skipif(ember.cuda.is_available(), reason="checks behaviour without a GPU")


# ---------------------------------------------------------------------------
# legacy tensor types


@pytest.mark.parametrize("name, dtype", LEGACY.items())
def test_legacy_type_constructors(name, dtype):
    cls = getattr(ember, name)
    assert cls.dtype is dtype and cls.is_cuda is False
    empty = cls(2, 3)
    assert empty.shape == (2, 3) and empty.dtype is dtype and empty.device == ember.device("cpu")
    assert cls().shape == (0,)
    assert cls(ember.Size([4])).shape == (4,)
    data = cls([1, 0, 1])
    assert data.dtype is dtype and data.tolist() == ember.tensor([1, 0, 1], dtype=dtype).tolist()
    from_numpy = cls(np.array([1, 2]))
    assert from_numpy.dtype is dtype


def test_legacy_type_of_a_tensor_aliases_it():
    x = ember.tensor([1, 2])
    y = ember.LongTensor(x)
    assert y is not x and y.data_ptr() == x.data_ptr()
    y[0] = 7
    assert x.tolist() == [7, 2]
    with pytest.raises(TypeError, match="dtype ember.int64.*got one of dtype ember.float32"):
        ember.LongTensor(ember.ones(2))


def test_legacy_type_constructor_errors():
    with pytest.raises(TypeError, match="takes sizes"):
        ember.FloatTensor(2.5)
    with pytest.raises(TypeError, match=r"\(list, list\)"):
        ember.FloatTensor([1], [2])
    with pytest.raises(RuntimeError, match="expects device type cpu"):
        ember.FloatTensor(2, device="meta")


@pytest.mark.parametrize("name, dtype", LEGACY.items())
def test_isinstance_checks_dtype_and_device(name, dtype):
    cls = getattr(ember, name)
    t = ember.zeros(2, dtype=dtype)
    assert isinstance(t, cls)
    assert not isinstance(t, getattr(ember.cuda, name))
    others = [getattr(ember, n) for n in LEGACY if n != name]
    assert not any(isinstance(t, other) for other in others)
    assert not isinstance(ember.zeros(2, dtype=dtype, device="meta"), cls)
    assert not isinstance(np.zeros(2), cls)
    assert not issubclass(cls, ember.Tensor)  # as in PyTorch: every tensor is an ember.Tensor
    assert isinstance(ember.nn.Parameter(ember.ones(2)), ember.FloatTensor)


def test_type_strings():
    assert ember.ones(2).type() == "ember.FloatTensor"
    assert ember.ones(2, dtype=ember.int64).type() == "ember.LongTensor"
    assert ember.ones(2, dtype=ember.complex64).type() == "ember.ComplexFloatTensor"
    assert ember.ones(2, device="meta").type() == "ember.meta.FloatTensor"
    assert repr(ember.FloatTensor) == "<class 'ember.FloatTensor'>"
    assert repr(ember.cuda.LongTensor) == "<class 'ember.cuda.LongTensor'>"


def test_type_converts():
    x = ember.tensor([1.5, -2.5])
    assert x.type(ember.LongTensor).dtype is ember.int64
    assert x.type(ember.LongTensor).tolist() == [1, -2]
    assert x.type("ember.IntTensor").dtype is ember.int32
    assert x.type("torch.DoubleTensor").dtype is ember.float64  # PyTorch's spelling, in ported code
    assert x.type(ember.float16).dtype is ember.float16
    assert x.type(ember.FloatTensor) is x  # already that type: no copy, as Tensor.to
    with pytest.raises(ValueError, match="invalid type: 'ember.Foo'"):
        x.type("ember.Foo")


@NO_CUDA
def test_cuda_types_without_a_gpu():
    with pytest.raises(TypeError, match="ember.cuda.FloatTensor not available"):
        ember.cuda.FloatTensor(2)
    assert not isinstance(ember.ones(2), ember.cuda.FloatTensor)
    assert ember.cuda.FloatTensor.is_cuda is True


@pytest.mark.cuda
def test_cuda_types_on_a_gpu():
    if not ember.cuda.is_available():
        pytest.skip("needs a GPU")
    t = ember.cuda.FloatTensor(2, 3)
    assert t.device.type == "cuda" and t.dtype is ember.float32 and isinstance(t, ember.cuda.FloatTensor)
    assert t.type() == "ember.cuda.FloatTensor"
    assert ember.ones(2).type(ember.cuda.LongTensor).device.type == "cuda"
    assert ember.cuda.LongTensor([1, 2]).tolist() == [1, 2]


def test_set_default_tensor_type():
    before = ember.get_default_dtype()
    try:
        with pytest.warns(UserWarning, match="deprecated"):
            ember.set_default_tensor_type(ember.DoubleTensor)
        assert ember.get_default_dtype() is ember.float64
        assert ember.tensor([1.0]).dtype is ember.float64
        with pytest.warns(UserWarning):
            ember.set_default_tensor_type("torch.FloatTensor")
        assert ember.get_default_dtype() is ember.float32
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with pytest.raises(TypeError, match="only floating-point"):
                ember.set_default_tensor_type(ember.LongTensor)
            with pytest.raises(RuntimeError, match="no default device"):
                ember.set_default_tensor_type(ember.cuda.FloatTensor)
            with pytest.raises(TypeError, match="legacy tensor type"):
                ember.set_default_tensor_type(ember.float64)
    finally:
        ember.set_default_dtype(before)


# ---------------------------------------------------------------------------
# device predicates

PREDICATES = ["is_xpu", "is_mps", "is_ipu", "is_hpu", "is_maia", "is_mtia", "is_vulkan", "is_xla", "is_mkldnn"]


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_device_predicates(device):
    t = ember.ones(2, device=device)
    assert t.is_cpu is (device == "cpu")
    assert t.is_meta is (device == "meta")
    assert t.is_cuda is False
    for name in PREDICATES:
        assert getattr(t, name) is False, name
        assert isinstance(getattr(ember.Tensor, name), property), name


def test_predicate_answers_for_a_device_of_that_name():
    predicate = ember.Tensor.is_xpu.fget

    class FakeDevice:
        type = "xpu"

    class FakeTensor:
        _device = FakeDevice()

    assert predicate(FakeTensor()) is True


# ---------------------------------------------------------------------------
# ember.accelerator


@pytest.fixture
def cpu_only(monkeypatch):
    """A machine without an accelerator: no GPU, and out-of-tree devices that other test modules
    registered (test_backend_registration's) hidden from ember.accelerator for this test."""
    if ember.cuda.is_available():
        pytest.skip("checks the behaviour without a GPU")
    monkeypatch.setattr(acc, "_out_of_tree_types", lambda: [])


def test_accelerator_on_cpu(cpu_only):
    assert acc.is_available() is False
    assert acc.current_accelerator(check_available=True) is None
    assert acc.device_count() == 0
    for call in (acc.current_device_index, acc.synchronize, acc.current_stream, acc.memory_allocated):
        with pytest.raises(RuntimeError, match="Cannot access accelerator device when none is available"):
            call()
    with pytest.raises(RuntimeError, match="none is available"):
        acc.set_device_index(0)
    with pytest.raises(RuntimeError, match="none is available"):
        with acc.device_index(0):
            pass
    with acc.device_index(None):  # None needs no accelerator
        pass
    if not acc._cuda_built():
        assert acc.current_accelerator() is None


class _FakeBackend(_device.Backend):
    """An out-of-tree backend with two devices, to see how accelerator treats one."""

    def __init__(self, available=True):
        self.available = available
        self.index = 0
        self.synced = []

    def is_available(self):
        return self.available

    def device_count(self):
        return 2

    def current_index(self):
        return self.index

    def set_index(self, index):
        self.index = index

    def synchronize(self, index):
        self.synced.append(index)


@pytest.fixture
def fake_accelerator(monkeypatch):
    if ember.cuda.is_available():
        pytest.skip("CUDA is the accelerator here; an out-of-tree device comes after it")
    backend = _FakeBackend()
    backend.name = "fakeaccel"
    monkeypatch.setitem(_device._BACKENDS, "fakeaccel", backend)
    # Only this one counts: others registered by earlier tests of this session come first otherwise.
    monkeypatch.setattr(acc, "_out_of_tree_types", lambda: ["fakeaccel"])
    return backend


def test_out_of_tree_device_is_the_accelerator(fake_accelerator):
    assert acc.is_available()
    assert acc.current_accelerator() == ember.device("fakeaccel")
    assert acc.device_count() == 2
    assert acc.current_device_index() == 0
    with acc.device_index(1):
        assert acc.current_device_index() == 1
    assert acc.current_device_index() == 0
    acc.set_device_index("fakeaccel:1")
    assert fake_accelerator.index == 1
    acc.set_device_index(-1)  # ignored, as in PyTorch
    assert fake_accelerator.index == 1
    acc.synchronize()
    acc.synchronize(0)
    assert fake_accelerator.synced == [1, 0]
    with pytest.raises(ValueError, match="not of the current accelerator type"):
        acc.set_device_index("cpu")
    with pytest.raises(RuntimeError, match="has no streams"):
        acc.current_stream()


def test_unavailable_out_of_tree_device(fake_accelerator):
    fake_accelerator.available = False
    assert not acc.is_available()
    assert acc.current_accelerator(check_available=True) is None
    assert acc.current_accelerator(check_available=False) in (ember.device("fakeaccel"), ember.device("cuda"))


@pytest.mark.cuda
def test_accelerator_is_cuda_on_a_gpu():
    if not ember.cuda.is_available():
        pytest.skip("needs a GPU")
    assert acc.current_accelerator() == ember.device("cuda")
    assert acc.device_count() == ember.cuda.device_count()
    assert acc.current_device_index() == ember.cuda.current_device()
    x = ember.ones(1000, device="cuda") * 2
    acc.synchronize()
    assert x.sum().item() == 2000
    assert acc.current_stream().device_index == ember.cuda.current_device()
    assert acc.memory_allocated() == ember.cuda.memory_allocated()


# ---------------------------------------------------------------------------
# ember.backends


def test_cudnn_flags():
    cudnn = ember.backends.cudnn
    assert (cudnn.enabled, cudnn.benchmark, cudnn.deterministic, cudnn.allow_tf32) == (True, False, False, True)
    assert cudnn.benchmark_limit == 10
    assert cudnn.is_available() is False and cudnn.version() is None
    assert cudnn.is_acceptable(ember.ones(1)) is False
    cudnn.benchmark = True
    try:
        assert cudnn.benchmark is True
        from ember.backends.cudnn import benchmark

        assert benchmark is True
    finally:
        cudnn.benchmark = False
    with pytest.raises(RuntimeError, match="cudnn.benchmark expects a bool, but got int"):
        cudnn.benchmark = 1
    with pytest.raises(RuntimeError, match="non-negative int"):
        cudnn.benchmark_limit = -1
    with cudnn.flags(enabled=True, deterministic=True):
        assert cudnn.deterministic is True and cudnn.enabled is True
        assert cudnn.benchmark is False
    assert cudnn.deterministic is False and cudnn.enabled is True
    with cudnn.flags():  # PyTorch's flags() sets every flag, to its own defaults
        assert cudnn.enabled is False
    assert cudnn.enabled is True
    with pytest.raises(KeyError):
        with cudnn.flags(benchmark=True):
            raise KeyError("restored on errors too")
    assert cudnn.benchmark is False


def test_cuda_backend_flags():
    cuda = ember.backends.cuda
    assert cuda.matmul.allow_tf32 is False
    assert cuda.matmul.allow_fp16_reduced_precision_reduction is True
    cuda.matmul.allow_tf32 = True
    try:
        assert cuda.matmul.allow_tf32 is True
    finally:
        cuda.matmul.allow_tf32 = False
    with pytest.raises(RuntimeError, match="expects a bool"):
        cuda.matmul.allow_tf32 = "yes"
    with pytest.raises(AttributeError, match="Unknown attribute foo"):
        cuda.matmul.foo = True
    with pytest.raises(AttributeError, match="Unknown attribute foo"):
        cuda.matmul.foo  # noqa: B018
    assert cuda.is_built() is (importlib.util.find_spec("cupy") is not None)
    assert cuda.flash_sdp_enabled() and cuda.math_sdp_enabled()
    cuda.enable_flash_sdp(False)
    try:
        assert cuda.flash_sdp_enabled() is False
    finally:
        cuda.enable_flash_sdp(True)
    with pytest.warns(FutureWarning, match="deprecated"):
        with cuda.sdp_kernel(enable_flash=False, enable_math=True, enable_mem_efficient=False):
            assert not cuda.flash_sdp_enabled() and not cuda.mem_efficient_sdp_enabled()
    assert cuda.flash_sdp_enabled() and cuda.mem_efficient_sdp_enabled()


def test_other_backends():
    b = ember.backends
    assert b.mps.is_available() is False and b.mps.is_built() is False
    assert b.mkldnn.is_available() is False and b.mkldnn.enabled is True
    with b.mkldnn.flags(enabled=False):
        assert b.mkldnn.enabled is False
    assert b.mkldnn.enabled is True
    assert b.openmp.is_available() is bool(ember._C.has_openmp)
    assert isinstance(b.mkl.is_available(), bool)
    has_opt_einsum = importlib.util.find_spec("opt_einsum") is not None
    assert b.opt_einsum.is_available() is has_opt_einsum
    assert b.opt_einsum.enabled is has_opt_einsum
    assert b.opt_einsum.strategy == ("auto" if has_opt_einsum else None)
    if not has_opt_einsum:
        assert b.opt_einsum.get_opt_einsum() is None
        with pytest.raises(ValueError, match="not installed"):
            b.opt_einsum.enabled = True
        with pytest.raises(ValueError, match="not installed"):
            b.opt_einsum.strategy = "greedy"
    with pytest.raises(ValueError, match="must be one of"):
        b.opt_einsum.strategy = "fastest"


# ---------------------------------------------------------------------------
# ember.nn.parallel


def test_data_parallel_on_cpu_calls_the_module(cpu_only):
    ember.manual_seed(0)
    inner = ember.nn.Linear(3, 2)
    model = ember.nn.DataParallel(inner)
    assert model.module is inner and model.device_ids == []
    x = ember.randn(4, 3)
    assert ember.equal(model(x), inner(x))
    assert list(model.state_dict()) == ["module.weight", "module.bias"]
    assert "(module): Linear(in_features=3, out_features=2, bias=True)" in repr(model)
    assert ember.equal(ember.nn.parallel.data_parallel(inner, x), inner(x))
    assert ember.equal(ember.nn.parallel.data_parallel(inner, (x,), module_kwargs={}), inner(x))


def test_data_parallel_checkpoints_move_to_the_bare_model():
    ember.manual_seed(0)
    wrapped = ember.nn.DataParallel(ember.nn.Linear(3, 2))
    state = wrapped.state_dict()
    consume_prefix_in_state_dict_if_present(state, "module.")
    bare = ember.nn.Linear(3, 2)
    bare.load_state_dict(state)
    assert ember.equal(bare.weight, wrapped.module.weight)


def test_data_parallel_over_several_devices_is_refused(monkeypatch):
    monkeypatch.setattr(acc, "current_accelerator", lambda check_available=False: ember.device("cuda"))
    monkeypatch.setattr(acc, "device_count", lambda: 2)
    model = ember.nn.DataParallel(ember.nn.Linear(3, 2))
    assert model.device_ids == [0, 1] and model.output_device == 0
    with pytest.raises(NotImplementedError, match="DataParallel over 2 devices"):
        model(ember.ones(1, 3))
    one = ember.nn.DataParallel(ember.nn.Linear(3, 2), device_ids=["cuda:1"])
    assert one.device_ids == [1] and one.src_device_obj == ember.device("cuda", 1)
    with pytest.raises(RuntimeError, match=r"parameters and buffers on device cuda:1 \(device_ids\[0\]\)"):
        one(ember.ones(1, 3))  # the module's parameters are on the CPU


@pytest.mark.cuda
def test_data_parallel_on_one_gpu():
    if not ember.cuda.is_available():
        pytest.skip("needs a GPU")
    ember.manual_seed(0)
    inner = ember.nn.Linear(3, 2).cuda()
    model = ember.nn.DataParallel(inner, device_ids=[0])
    assert model.device_ids == [0] and model.src_device_obj == ember.device("cuda", 0)
    x = ember.randn(4, 3)
    out = model(x)  # a CPU input moves to cuda:0, as PyTorch scatters it there
    assert out.device == ember.device("cuda", 0)
    assert ember.equal(out.cpu(), inner(x.cuda()).cpu())
    with pytest.raises(RuntimeError, match="parameters and buffers on device cuda:0"):
        ember.nn.DataParallel(ember.nn.Linear(3, 2), device_ids=[0])(x)


@pytest.mark.cuda
def test_accelerator_set_stream_on_a_gpu():
    if not ember.cuda.is_available():
        pytest.skip("needs a GPU")
    before = acc.current_stream()
    stream = ember.cuda.Stream()
    acc.set_stream(stream)
    try:
        assert acc.current_stream()._cupy.ptr == stream._cupy.ptr
    finally:
        acc.set_stream(before)
    assert acc.current_stream()._cupy.ptr == before._cupy.ptr


def test_data_parallel_rejects_a_non_module():
    with pytest.raises(TypeError, match="must be an ember.nn.Module"):
        ember.nn.DataParallel(lambda x: x)


def test_distributed_data_parallel_needs_ember_distributed():
    if importlib.util.find_spec("ember.distributed") is not None:
        pytest.skip("ember-distributed is installed")
    # importable (scripts import it and train on one process), answers isinstance, refuses to be built
    from ember.nn.parallel import DistributedDataParallel

    assert hasattr(ember.nn.parallel, "DistributedDataParallel")
    assert not isinstance(ember.nn.Linear(2, 2), (ember.nn.DataParallel, DistributedDataParallel))
    with pytest.raises(MissingDistributionError, match="ember-distributed"):
        DistributedDataParallel(ember.nn.Linear(2, 2))
    namespace = {}
    exec("from ember.nn.parallel import *", namespace)  # must not need ember-distributed
    assert "DataParallel" in namespace and "DistributedDataParallel" not in namespace
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        ember.nn.parallel.Nope  # noqa: B018


# ---------------------------------------------------------------------------
# PyTorch's module paths


@pytest.mark.parametrize("target, source, names", _paths.PYTORCH_PATHS)
def test_pytorch_module_paths(target, source, names):
    target_module = importlib.import_module(f"ember.nn.modules.{target}")
    source_module = importlib.import_module(f"ember.nn.modules.{source}")
    for name in names:
        alias, original = name if isinstance(name, tuple) else (name, name)
        assert getattr(target_module, alias) is getattr(source_module, original)


def test_path_imports_as_programs_write_them():
    from ember.nn.modules.activation import MultiheadAttention
    from ember.nn.modules.instancenorm import InstanceNorm2d, LazyInstanceNorm1d
    from ember.nn.modules.linear import NonDynamicallyQuantizableLinear
    from ember.nn.modules.utils import _pair, _quadruple, _single, _triple

    assert MultiheadAttention is ember.nn.MultiheadAttention
    assert InstanceNorm2d is ember.nn.InstanceNorm2d and LazyInstanceNorm1d is ember.nn.LazyInstanceNorm1d
    assert type(MultiheadAttention(4, 2).out_proj) is NonDynamicallyQuantizableLinear
    assert issubclass(NonDynamicallyQuantizableLinear, ember.nn.Linear)
    assert (_single(2), _pair(2), _triple((1, 2, 3)), _quadruple(0)) == ((2,), (2, 2), (1, 2, 3), (0, 0, 0, 0))
    assert ember.nn.modules.utils is importlib.import_module("ember.nn.modules.utils")
    assert ember.nn.utils.__name__ == "ember.nn.utils"  # not shadowed by nn.modules.utils
    assert not hasattr(ember.nn, "instancenorm")
    with pytest.raises(AttributeError):
        ember.nn.modules.nothing_here  # noqa: B018


def test_distributed_sampler_path():
    from ember.utils.data.distributed import DistributedSampler

    assert DistributedSampler is ember.utils.data.DistributedSampler
    sampler = DistributedSampler(list(range(10)), num_replicas=3, rank=1, shuffle=False)
    assert list(sampler) == [1, 4, 7, 0]  # padded with the first indices to 12, then every third from 1


def test_consume_prefix_in_state_dict():
    state = OrderedDict([("module.a", 1), ("other", 2), ("module.b", 3)])
    state._metadata = OrderedDict([("", {"v": 1}), ("module", {"v": 2}), ("module.sub", {"v": 3})])
    consume_prefix_in_state_dict_if_present(state, "module.")
    assert list(state.items()) == [("other", 2), ("a", 1), ("b", 3)]  # renamed entries move to the end
    assert state._metadata == {"": {"v": 2}, "sub": {"v": 3}}
    with pytest.raises(TypeError, match="prefix must be a str"):
        consume_prefix_in_state_dict_if_present(state, 1)


def test_fx_experimental_is_an_attribute():
    fx = pytest.importorskip("ember.fx", reason="needs ember-fx")
    assert fx.experimental.__name__ == "ember.fx.experimental"


def test_annotation_aliases():
    from ember.nn.common_types import _size_2_opt_t, _size_2_t, _size_any_t
    from ember.types import Device, Number, _size

    assert set(typing.get_args(_size_2_t)) == {int, tuple[int, int]}
    assert tuple[int, int] in typing.get_args(_size_any_t) or tuple[int, ...] in typing.get_args(_size_any_t)
    assert type(None) in typing.get_args(_size_2_opt_t)
    assert set(typing.get_args(Number)) == {int, float, bool}
    assert ember.device in typing.get_args(Device) and ember.Size in typing.get_args(_size)
    assert ember.nn.common_types is importlib.import_module("ember.nn.common_types")
    assert ember.types is importlib.import_module("ember.types")


def test_float32_matmul_precision():
    assert ember.get_float32_matmul_precision() == "highest"
    try:
        ember.set_float32_matmul_precision("high")
        assert ember.get_float32_matmul_precision() == "high" and ember.backends.cuda.matmul.allow_tf32 is True
        with pytest.raises(ValueError, match="must be one of"):
            ember.set_float32_matmul_precision("low")
        with pytest.raises(RuntimeError, match="expects a str, but got int"):
            ember.set_float32_matmul_precision(3)
        assert ember.get_float32_matmul_precision() == "high"
    finally:
        ember.set_float32_matmul_precision("highest")
    assert ember.backends.cuda.matmul.allow_tf32 is False


def test_typename_and_constants():
    assert ember.typename(ember.ones(2, dtype=ember.int64)) == "ember.LongTensor"
    assert ember.typename(ember.nn.Linear(1, 1)) == "ember.nn.modules.linear.Linear"
    assert ember.typename(ember.nn.Linear) == "ember.nn.modules.linear.Linear"
    assert (ember.typename(1), ember.typename("x")) == ("int", "str")
    import math

    assert (ember.inf, ember.pi, ember.e, ember.newaxis) == (math.inf, math.pi, math.e, None)
    assert math.isnan(ember.nan)
    assert ember.ones(3)[:, ember.newaxis].shape == (3, 1)


def test_where_with_the_condition_alone_is_nonzero_as_tuple():
    mask = np.array([[False, True, False], [True, True, False]])
    got = ember.where(ember.from_numpy(mask))
    assert isinstance(got, tuple) and len(got) == 2
    for ours, expected in zip(got, np.nonzero(mask)):
        assert ours.dtype == ember.int64 and ours.tolist() == expected.tolist()
    x = ember.tensor([-1.0, 2.0])
    assert ember.where(x > 0, x, 0.0).tolist() == [0.0, 2.0]
    out = ember.empty(2)
    assert ember.where(x > 0, x, 0.0, out=out) is out and out.tolist() == [0.0, 2.0]
    with pytest.raises(TypeError, match="either condition alone"):
        ember.where(x > 0, x)
