"""The public API of ember.nn / nn.init / nn.utils / ember.utils.data against torch's: every module
class torch.nn exports exists (or is listed below with the reason it does not), with the same
constructor and forward signatures (names, kinds, defaults); the same functions with the same
signatures; the same Module methods. Run after adding a name to see what else PyTorch users expect.
Skipped under a PyTorch other than the pinned one (``_parity_device.PINNED_TORCH``)."""

import inspect

import pytest
import torch
import torch.nn.functional as TF
import torch.utils.data
from _parity_device import pinned_torch_only

import ember
import ember.nn as enn
import ember.nn.functional as EF
import ember.utils.data

# Names and signatures change between PyTorch releases: this module checks the pinned one's.
pytestmark = [pytest.mark.parity, pinned_torch_only]

#: torch.nn module classes ember does not have, and why.
KNOWN_MISSING_MODULES = {
    "Container": "deprecated in PyTorch since 0.4 (use Module)",
    "CrossMapLRN2d": "legacy Lua-torch LRN whose values differ from LocalResponseNorm; not requested",
    "FractionalMaxPool2d": "needs the random fractional_max_pool ops in the registry",
    "FractionalMaxPool3d": "needs the random fractional_max_pool ops in the registry",
    "LinearCrossEntropyLoss": "new in PyTorch 2.13, with its own options class; needs F.linear_cross_entropy",
}

#: torch.nn.functional names ember does not have, and why.
KNOWN_MISSING_FUNCTIONAL = {
    "Optional": "a typing re-export",
    "assert_int_or_pair": "an internal helper",
    "boolean_dispatch": "an internal helper",
    "handle_torch_function": "ember.overrides.handle_ember_function under ember's name",
    "has_torch_function": "ember.overrides.has_ember_function under ember's name",
    "has_torch_function_unary": "ember.overrides.has_ember_function under ember's name",
    "has_torch_function_variadic": "ember.overrides.has_ember_function under ember's name",
    "conv_tbc": "legacy time-batch-channel convolution",
    "fractional_max_pool2d": "random op not in the registry yet",
    "fractional_max_pool2d_with_indices": "random op not in the registry yet",
    "fractional_max_pool3d": "random op not in the registry yet",
    "fractional_max_pool3d_with_indices": "random op not in the registry yet",
    "grouped_mm": "CUDA grouped GEMM",
    "scaled_grouped_mm": "CUDA low-precision GEMM",
    "scaled_mm": "CUDA low-precision GEMM",
    "linear_cross_entropy": "new in PyTorch 2.13 (chunked linear + cross-entropy)",
}

#: Names of torch.nn.utils / torch.utils.data that ember does not have, and why.
KNOWN_MISSING_UTILS = {
    "convert_conv2d_weight_memory_format": "ember has no channels_last layouts",
    "convert_conv3d_weight_memory_format": "ember has no channels_last layouts",
    "DFIterDataPipe": "DataPipes are deprecated in PyTorch",
    "DataChunk": "DataPipes are deprecated in PyTorch",
    "IterDataPipe": "DataPipes are deprecated in PyTorch",
    "MapDataPipe": "DataPipes are deprecated in PyTorch",
    "argument_validation": "DataPipes are deprecated in PyTorch",
    "functional_datapipe": "DataPipes are deprecated in PyTorch",
    "guaranteed_datapipes_determinism": "DataPipes are deprecated in PyTorch",
    "non_deterministic": "DataPipes are deprecated in PyTorch",
    "runtime_validation": "DataPipes are deprecated in PyTorch",
    "runtime_validation_disabled": "DataPipes are deprecated in PyTorch",
}

#: Signatures that differ on purpose.
ALLOWED_SIGNATURE_DIFFERENCES = {
    # torch takes *args, **kwargs (a deprecated data_source); ember names the one argument
    "Sampler": "ember: (data_source=None)",
    # torch binds torch.default_generator as the default; ember's None means ember.default_generator
    "random_split": "generator=None",
}


def _torch_module_classes():
    return sorted(
        name for name, obj in vars(torch.nn).items()
        if inspect.isclass(obj) and issubclass(obj, torch.nn.Module) and not name.startswith("_")
    )


def _normalise(default):
    """Compare callables (``activation=F.relu``) by name, everything else by value."""
    if default is inspect.Parameter.empty:
        return "<required>"
    if callable(default) and not isinstance(default, type):
        return getattr(default, "__name__", getattr(default, "name", repr(default)))
    return default


def _params(f):
    return [(p.name, p.kind, _normalise(p.default)) for p in inspect.signature(f).parameters.values()]


def test_every_torch_module_class_exists_or_is_known_missing():
    missing = {name for name in _torch_module_classes() if not hasattr(enn, name)}
    assert missing == set(KNOWN_MISSING_MODULES)


PRESENT = [n for n in _torch_module_classes() if n not in KNOWN_MISSING_MODULES]


@pytest.mark.parametrize("name", PRESENT)
def test_module_constructor_and_forward_signatures_match_torch(name):
    t, e = getattr(torch.nn, name), getattr(enn, name)
    assert issubclass(e, enn.Module)
    assert _params(e.__init__) == _params(t.__init__)
    if t.forward is not torch.nn.Module.forward:  # containers such as ModuleList have no forward
        assert _params(e.forward) == _params(t.forward)


MODULE_METHODS = [
    "parameters", "buffers", "children", "modules", "named_parameters", "named_buffers", "named_children",
    "named_modules", "state_dict", "load_state_dict", "train", "eval", "requires_grad_", "zero_grad", "to",
    "to_empty", "cpu", "cuda", "half", "float", "double", "bfloat16", "type", "apply", "register_buffer",
    "register_parameter", "add_module", "register_module", "get_submodule", "set_submodule", "get_parameter",
    "get_buffer", "get_extra_state", "set_extra_state", "register_forward_pre_hook", "register_forward_hook",
    "register_full_backward_hook", "register_full_backward_pre_hook", "register_state_dict_pre_hook",
    "register_state_dict_post_hook", "register_load_state_dict_pre_hook", "register_load_state_dict_post_hook",
    "extra_repr",
]


@pytest.mark.parametrize("method", MODULE_METHODS)
def test_module_method_signatures_match_torch(method):
    t = [p[0] for p in _params(getattr(torch.nn.Module, method))]
    e = [p[0] for p in _params(getattr(enn.Module, method))]
    assert e == t


def test_functional_names_exist_or_are_known_missing():
    names = {n for n, obj in vars(TF).items() if not n.startswith("_") and callable(obj) and not inspect.isclass(obj)}
    missing = {n for n in names if not hasattr(EF, n)}
    assert missing == set(KNOWN_MISSING_FUNCTIONAL)


def _public_callables(module):
    names = getattr(module, "__all__", None) or [n for n in vars(module) if not n.startswith("_")]
    return sorted(
        n for n in names
        if not n.startswith("_") and callable(getattr(module, n, None)) and not inspect.ismodule(getattr(module, n))
    )


def _utils_pairs():
    import torch.nn.utils.fusion
    import torch.nn.utils.parametrizations
    import torch.nn.utils.parametrize
    import torch.nn.utils.rnn

    from ember.nn.utils import fusion, parametrizations, parametrize, rnn

    return [
        ("nn.init", torch.nn.init, enn.init),
        ("nn.utils", torch.nn.utils, enn.utils),
        ("nn.utils.parametrize", torch.nn.utils.parametrize, parametrize),
        ("nn.utils.parametrizations", torch.nn.utils.parametrizations, parametrizations),
        ("nn.utils.rnn", torch.nn.utils.rnn, rnn),
        ("nn.utils.fusion", torch.nn.utils.fusion, fusion),
        ("utils.data", torch.utils.data, ember.utils.data),
    ]


@pytest.mark.parametrize("label, tmod, emod", _utils_pairs(), ids=lambda v: v if isinstance(v, str) else "")
def test_utility_functions_exist_with_torch_signatures(label, tmod, emod):
    problems = []
    for name in _public_callables(tmod):
        if name in KNOWN_MISSING_UTILS:
            assert not hasattr(emod, name), f"{label}.{name} exists now: drop it from KNOWN_MISSING_UTILS"
            continue
        if not hasattr(emod, name):
            problems.append(f"missing {name}")
            continue
        t, e = getattr(tmod, name), getattr(emod, name)
        if inspect.isclass(t):
            t, e = t.__init__, e.__init__
        try:
            tp = _params(t)
        except (TypeError, ValueError):
            continue  # a builtin without a signature
        if name not in ALLOWED_SIGNATURE_DIFFERENCES and _params(e) != tp:
            problems.append(f"{name}: torch {tp} ember {_params(e)}")
    assert problems == []
