"""The names PyTorch programs import, against PyTorch: legacy tensor types (isinstance, type()
strings, constructors), device predicates, torch.accelerator on a machine without one,
torch.backends flag defaults, DataParallel without GPUs, nn.modules paths, and the
serialization arguments. Skipped under a PyTorch other than the pinned one where they check
API surface."""

import inspect
import warnings
from collections import OrderedDict

import numpy as np
import pytest
import torch
import torch.nn.modules.utils
from _parity_device import TORCH_DEVICE, pinned_torch_only

import ember
import ember.accelerator
import ember.nn.modules.utils

pytestmark = pytest.mark.parity

LEGACY_NAMES = [
    "FloatTensor",
    "DoubleTensor",
    "HalfTensor",
    "BFloat16Tensor",
    "ByteTensor",
    "CharTensor",
    "ShortTensor",
    "IntTensor",
    "LongTensor",
    "BoolTensor",
]
DTYPES = ["float32", "float64", "float16", "bfloat16", "uint8", "int8", "int16", "int32", "int64", "bool"]
ALL_DTYPES = DTYPES + ["complex64", "complex128"]


def _both(dtype_name, device="cpu"):
    return (
        ember.zeros(2, dtype=getattr(ember, dtype_name), device=device),
        torch.zeros(2, dtype=getattr(torch, dtype_name), device=device),
    )


# ---------------------------------------------------------------------------
# legacy tensor types


@pinned_torch_only
def test_same_legacy_type_names():
    def names(module):
        return {n for n in dir(module) if n.endswith("Tensor") and n[0].isupper() and n != "Tensor"}

    assert names(ember) == names(torch)
    assert {n for n in dir(ember.cuda) if n in names(torch.cuda)} == names(torch.cuda)


@pytest.mark.parametrize("name", LEGACY_NAMES)
@pytest.mark.parametrize("dtype_name", DTYPES)
@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_isinstance_matches(name, dtype_name, device):
    e, t = _both(dtype_name, device)
    assert isinstance(e, getattr(ember, name)) == isinstance(t, getattr(torch, name))
    assert isinstance(e, getattr(ember.cuda, name)) == isinstance(t, getattr(torch.cuda, name))
    assert issubclass(getattr(ember, name), ember.Tensor) == issubclass(getattr(torch, name), torch.Tensor)


@pytest.mark.parametrize("dtype_name", ALL_DTYPES)
@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_type_strings_match_with_ember_for_torch(dtype_name, device):
    e, t = _both(dtype_name, device)
    assert e.type() == t.type().replace("torch.", "ember.", 1)


@pytest.mark.parametrize("name", LEGACY_NAMES)
def test_type_conversion_matches(name):
    values = [1.5, -2.5, 0.0, 3.0]
    e, t = ember.tensor(values), torch.tensor(values)
    for target in (getattr(ember, name), f"ember.{name}", f"torch.{name}"):
        converted = e.type(target)
        expected = t.type(getattr(torch, name))
        assert converted.type() == expected.type().replace("torch.", "ember.")
        np.testing.assert_array_equal(
            converted.float().numpy(), expected.float().numpy(), err_msg=f"{name} via {target!r}"
        )


@pytest.mark.parametrize("name", LEGACY_NAMES)
def test_constructors_match(name):
    e_cls, t_cls = getattr(ember, name), getattr(torch, name)
    assert e_cls(2, 3).shape == tuple(t_cls(2, 3).shape)
    assert e_cls().shape == tuple(t_cls().shape)
    assert e_cls(ember.Size([4])).shape == tuple(t_cls(torch.Size([4])).shape)
    data = [1, 0, 2]
    np.testing.assert_array_equal(e_cls(data).float().numpy(), t_cls(data).float().numpy())
    np.testing.assert_array_equal(e_cls((1, 2)).float().numpy(), t_cls((1, 2)).float().numpy())
    assert e_cls.dtype.name == str(t_cls.dtype).replace("torch.", "")
    assert e_cls.is_cuda == t_cls.is_cuda and e_cls.is_sparse == t_cls.is_sparse
    # A tensor of another dtype is refused by both with TypeError; a scalar too.
    other = "LongTensor" if name != "LongTensor" else "FloatTensor"
    for bad_e, bad_t in ((getattr(ember, other)([1]), getattr(torch, other)([1])), (2.5, 2.5)):
        with pytest.raises(TypeError):
            t_cls(bad_t)
        with pytest.raises(TypeError):
            e_cls(bad_e)


def test_set_default_tensor_type_matches():
    before_e, before_t = ember.get_default_dtype(), torch.get_default_dtype()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ember.set_default_tensor_type(ember.DoubleTensor)
            torch.set_default_tensor_type(torch.DoubleTensor)
            assert ember.get_default_dtype().name == str(torch.get_default_dtype()).replace("torch.", "")
            for e_arg, t_arg in ((ember.LongTensor, torch.LongTensor), ("torch.IntTensor", "torch.IntTensor")):
                with pytest.raises(TypeError):
                    torch.set_default_tensor_type(t_arg)
                with pytest.raises(TypeError):
                    ember.set_default_tensor_type(e_arg)
    finally:
        ember.set_default_dtype(before_e)
        torch.set_default_dtype(before_t)


# ---------------------------------------------------------------------------
# device predicates

# is_* properties of torch.Tensor that are not device predicates, each owned elsewhere.
NOT_DEVICE_PREDICATES = {"is_leaf", "is_nested", "is_quantized", "is_sparse", "is_sparse_csr"}


def _torch_device_predicates():
    return sorted(
        n
        for n in dir(torch.Tensor)
        if n.startswith("is_")
        and type(getattr(torch.Tensor, n)).__name__ in ("getset_descriptor", "property")
        and n not in NOT_DEVICE_PREDICATES
    )


@pinned_torch_only
@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_device_predicates_match(device):
    e, t = ember.ones(2, device=device), torch.ones(2, device=device)
    for name in _torch_device_predicates():
        assert isinstance(getattr(ember.Tensor, name), property), name
        assert getattr(e, name) == getattr(t, name), name


# ---------------------------------------------------------------------------
# accelerator, on a machine without one


@pytest.fixture
def cpu_only(monkeypatch):
    """Neither library sees an accelerator: skipped with a GPU; out-of-tree devices registered by
    other test modules are hidden from ember.accelerator for this test."""
    if torch.accelerator.is_available() or ember.cuda.is_available():
        pytest.skip("compares the behaviour without an accelerator")
    monkeypatch.setattr(ember.accelerator, "_out_of_tree_types", lambda: [])


def test_accelerator_without_one_matches(cpu_only):
    assert ember.accelerator.is_available() == torch.accelerator.is_available()
    assert ember.accelerator.current_accelerator(check_available=True) is None
    assert torch.accelerator.current_accelerator(check_available=True) is None
    assert ember.accelerator.device_count() == torch.accelerator.device_count()
    calls = [
        ("current_device_index", ()),
        ("synchronize", ()),
        ("set_device_index", (0,)),
        ("current_stream", ()),
        ("memory_allocated", ()),
        ("empty_cache", ()),
    ]
    for name, args in calls:
        with pytest.raises(RuntimeError) as torch_error:
            getattr(torch.accelerator, name)(*args)
        with pytest.raises(RuntimeError) as ember_error:
            getattr(ember.accelerator, name)(*args)
        assert str(ember_error.value) == str(torch_error.value), name
    with torch.accelerator.device_index(None), ember.accelerator.device_index(None):
        pass


@pinned_torch_only
def test_accelerator_signatures_match():
    for name in ember.accelerator.__all__:
        if name in ("current_device_idx", "set_device_idx"):
            continue
        e, t = getattr(ember.accelerator, name), getattr(torch.accelerator, name)
        e_params = [(p.name, p.kind, p.default) for p in inspect.signature(e).parameters.values()]
        t_params = [(p.name, p.kind, p.default) for p in inspect.signature(t).parameters.values()]
        if name.startswith(("memory_", "max_memory_", "reset_peak", "empty_cache")):
            continue  # ember forwards these to ember.cuda's, whose arguments are PyTorch's torch.cuda ones
        assert e_params == t_params, name


# ---------------------------------------------------------------------------
# backends

# _parity_device turns PyTorch's TF32 and reduced-precision switches off when PyTorch runs on a
# GPU (for exact float32 references), so they no longer hold PyTorch's defaults there.
SET_BY_HARNESS = (
    {"allow_tf32", "allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction"}
    if TORCH_DEVICE == "cuda"
    else set()
)

CUDNN_FLAGS = [f for f in ("enabled", "benchmark", "deterministic", "allow_tf32") if f not in SET_BY_HARNESS]
if torch.backends.cudnn.is_available():
    # PyTorch's CPU build reports None for it; its CUDA builds report 10, ember's value.
    CUDNN_FLAGS.append("benchmark_limit")


def test_cudnn_flag_defaults_match():
    for flag in CUDNN_FLAGS:
        assert getattr(ember.backends.cudnn, flag) == getattr(torch.backends.cudnn, flag), flag
    if not torch.backends.cudnn.is_available():  # PyTorch's CPU build: both say no cuDNN
        assert ember.backends.cudnn.is_available() is torch.backends.cudnn.is_available()
        assert ember.backends.cudnn.version() is torch.backends.cudnn.version()


def test_cudnn_flags_context_matches():
    with ember.backends.cudnn.flags(benchmark=True), torch.backends.cudnn.flags(benchmark=True):
        for flag in CUDNN_FLAGS:
            assert getattr(ember.backends.cudnn, flag) == getattr(torch.backends.cudnn, flag), flag
    for flag in CUDNN_FLAGS:
        assert getattr(ember.backends.cudnn, flag) == getattr(torch.backends.cudnn, flag), flag
    for module in (ember.backends.cudnn, torch.backends.cudnn):
        with pytest.raises(RuntimeError, match="expects a bool, but got str"):
            module.benchmark = "yes"


@pinned_torch_only
def test_cudnn_flags_signature_matches():
    e_params = [(p.name, p.default) for p in inspect.signature(ember.backends.cudnn.flags).parameters.values()]
    t_params = [(p.name, p.default) for p in inspect.signature(torch.backends.cudnn.flags).parameters.values()]
    # PyTorch 2.9 added fp32_precision and depthwise_kernel (its TF32 and depthwise-conv choices).
    assert e_params == [p for p in t_params if p[0] not in ("fp32_precision", "depthwise_kernel")]


def test_cuda_backend_defaults_match():
    for flag in {
        "allow_tf32",
        "allow_fp16_reduced_precision_reduction",
        "allow_bf16_reduced_precision_reduction",
    } - SET_BY_HARNESS:
        assert getattr(ember.backends.cuda.matmul, flag) == getattr(torch.backends.cuda.matmul, flag), flag
    for kind in ("flash", "mem_efficient", "math", "cudnn"):
        name = f"{kind}_sdp_enabled"
        assert getattr(ember.backends.cuda, name)() == getattr(torch.backends.cuda, name)(), name
    with pytest.raises(AttributeError, match="Unknown attribute foo"):
        torch.backends.cuda.matmul.foo = True
    with pytest.raises(AttributeError, match="Unknown attribute foo"):
        ember.backends.cuda.matmul.foo = True


def test_mps_and_opt_einsum_match():
    assert ember.backends.mps.is_available() == torch.backends.mps.is_available()
    assert ember.backends.mps.is_built() == torch.backends.mps.is_built()
    for name in ("is_available",):
        assert getattr(ember.backends.opt_einsum, name)() == getattr(torch.backends.opt_einsum, name)()
    assert ember.backends.opt_einsum.enabled == torch.backends.opt_einsum.enabled
    assert ember.backends.opt_einsum.strategy == torch.backends.opt_einsum.strategy


@pinned_torch_only
def test_backends_submodules_present():
    # The rest of torch.backends (cpu, cusparselt, kleidiai, mha, miopen, nnpack, quantized, ...) is
    # listed as missing in docs/pytorch_coverage.rst.
    for name in ("cuda", "cudnn", "mps", "opt_einsum", "mkldnn", "mkl", "openmp"):
        assert hasattr(torch.backends, name) and hasattr(ember.backends, name), name


# ---------------------------------------------------------------------------
# DataParallel without GPUs


def test_data_parallel_on_cpu_matches(cpu_only):
    ember.manual_seed(0)
    e_inner = ember.nn.Linear(3, 2)
    t_inner = torch.nn.Linear(3, 2)
    with torch.no_grad():
        t_inner.weight.copy_(torch.from_numpy(e_inner.weight.detach().numpy()))
        t_inner.bias.copy_(torch.from_numpy(e_inner.bias.detach().numpy()))
    e_model, t_model = ember.nn.DataParallel(e_inner), torch.nn.DataParallel(t_inner)
    assert e_model.device_ids == t_model.device_ids == []
    assert list(e_model.state_dict()) == list(t_model.state_dict())
    assert repr(e_model) == repr(t_model)
    x = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    np.testing.assert_allclose(
        e_model(ember.from_numpy(x)).detach().numpy(), t_model(torch.from_numpy(x)).detach().numpy(), rtol=1e-6
    )


@pinned_torch_only
def test_data_parallel_signatures_match():
    for attr in ("__init__", "forward"):
        e = inspect.signature(getattr(ember.nn.DataParallel, attr))
        t = inspect.signature(getattr(torch.nn.DataParallel, attr))
        assert [(p.name, p.kind, p.default) for p in e.parameters.values()] == [
            (p.name, p.kind, p.default) for p in t.parameters.values()
        ], attr


def test_consume_prefix_matches():
    def sample():
        state = OrderedDict([("module.a", 1), ("other", 2), ("module.b", 3)])
        state._metadata = OrderedDict([("", {"v": 1}), ("module", {"v": 2}), ("module.sub", {"v": 3})])
        return state

    e, t = sample(), sample()
    ember.nn.modules.utils.consume_prefix_in_state_dict_if_present(e, "module.")
    torch.nn.modules.utils.consume_prefix_in_state_dict_if_present(t, "module.")
    assert list(e.items()) == list(t.items())
    assert list(e._metadata.items()) == list(t._metadata.items())


# ---------------------------------------------------------------------------
# nn.modules paths

#: Names of torch.nn.modules.<module>.__all__ ember lacks, and why.
KNOWN_MISSING_PATHS = {
    "container.Container": "deprecated in PyTorch since 0.4",
    "normalization.CrossMapLRN2d": "not in ember.nn (see test_nn_api_parity)",
    "pooling.FractionalMaxPool2d": "not in ember.nn (see test_nn_api_parity)",
    "pooling.FractionalMaxPool3d": "not in ember.nn (see test_nn_api_parity)",
    "loss.LinearCrossEntropyLoss": "not in ember.nn (see test_nn_api_parity)",
    "linear_cross_entropy_options.LinearCrossEntropyOptions": "comes with LinearCrossEntropyLoss",
    "module.register_module_forward_pre_hook": "global module hooks: not in ember yet",
    "module.register_module_forward_hook": "global module hooks: not in ember yet",
    "module.register_module_full_backward_pre_hook": "global module hooks: not in ember yet",
    "module.register_module_backward_hook": "global module hooks: not in ember yet",
    "module.register_module_full_backward_hook": "global module hooks: not in ember yet",
    "module.register_module_buffer_registration_hook": "global module hooks: not in ember yet",
    "module.register_module_module_registration_hook": "global module hooks: not in ember yet",
    "module.register_module_parameter_registration_hook": "global module hooks: not in ember yet",
}


def _torch_module_paths():
    import importlib
    import pkgutil

    paths = []
    for info in pkgutil.iter_modules(torch.nn.modules.__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"torch.nn.modules.{info.name}")
        paths += [f"{info.name}.{name}" for name in getattr(module, "__all__", [])]
    return paths


def _ember_has(path):
    import importlib

    module_name, name = path.rsplit(".", 1)
    try:
        module = importlib.import_module(f"ember.nn.modules.{module_name}")
    except ImportError:
        return False
    return hasattr(module, name)


@pinned_torch_only
def test_nn_modules_paths():
    missing = {p for p in _torch_module_paths() if not _ember_has(p)}
    assert missing == set(KNOWN_MISSING_PATHS)
    # The common non-public paths of ported code work too.
    for path in ("batchnorm._BatchNorm", "conv._ConvNd", "loss._Loss", "utils._pair", "module._addindent"):
        assert _ember_has(path), path


# ---------------------------------------------------------------------------
# serialization


@pinned_torch_only
def test_serialization_arguments_cover_pytorchs():
    for fn in ("save", "load"):
        e = inspect.signature(getattr(ember, fn)).parameters
        t = inspect.signature(getattr(torch, fn)).parameters
        assert [n for n in t if n not in e] == [], fn
    for name in ("add_safe_globals", "get_safe_globals", "clear_safe_globals", "safe_globals"):
        assert callable(getattr(torch.serialization, name)) and callable(getattr(ember.serialization, name))


def test_safe_globals_behave_alike():
    class Config:
        pass

    for module in (torch.serialization, ember.serialization):
        # (PyTorch adds some of its own classes to the list on first use: compare membership only.)
        with module.safe_globals([Config]):
            assert Config in module.get_safe_globals()
        assert Config not in module.get_safe_globals()


@pinned_torch_only
def test_annotation_modules_have_pytorchs_names():
    import torch.nn.common_types
    import torch.types

    import ember.nn.common_types
    import ember.types

    def public_aliases(module):
        return {
            n for n in vars(module) if n.startswith(("_size", "_ratio", "_scalar_or_tuple", "_maybe", "_tensor_list"))
        }

    assert public_aliases(ember.nn.common_types) == public_aliases(torch.nn.common_types)
    for name in (*torch.types.__all__, "_size", "_int", "_float", "_bool", "_dtype", "_device", "_TensorOrTensors"):
        assert hasattr(ember.types, name), name


def test_float32_matmul_precision_matches():
    assert ember.get_float32_matmul_precision() == torch.get_float32_matmul_precision()
    for module in (torch, ember):
        with pytest.raises(RuntimeError, match="expects a str, but got int"):
            module.set_float32_matmul_precision(3)


def test_typename_and_constants_match():
    for dtype_name in ALL_DTYPES:
        e, t = _both(dtype_name)
        assert ember.typename(e) == torch.typename(t).replace("torch.", "ember.", 1)
    assert ember.typename(ember.nn.Linear(1, 1)) == torch.typename(torch.nn.Linear(1, 1)).replace("torch.", "ember.")
    for value in (1, "x", 2.5, None):
        assert ember.typename(value) == torch.typename(value)
    for name in ("inf", "pi", "e", "newaxis"):
        assert getattr(ember, name) == getattr(torch, name), name
