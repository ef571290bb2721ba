"""Ember: tensors with the PyTorch programming model, written Python-first.

``import ember`` gives the tensor, dtypes, devices, the op library (as
``ember.<op>`` functions and Tensor methods), serialization and random
numbers. Installed extension distributions (ember-autograd, ember-fx, ...)
are loaded through the ``ember.extensions`` entry-point group.
"""

import builtins as _builtins
import math as _math
import pkgutil as _pkgutil

# Subpackages shipped by other distributions (ember.autograd, ember.fx, ...)
# live in other directories; extend_path lets editable installs find them.
__path__ = _pkgutil.extend_path(__path__, __name__)

from ._openmp import short_spin_waits as _short_spin_waits  # noqa: E402

with _short_spin_waits():  # idle OpenMP threads spin briefly, then sleep (see ember._openmp)
    from . import _C  # noqa: E402 - the compiled extension; import fails loudly if the build is broken
from ._malloc import keep_freed_memory as _keep_freed_memory  # noqa: E402

_keep_freed_memory()  # mid-size tensors reuse freed heap memory instead of fresh pages (see ember._malloc)
from ._device import device  # noqa: E402
from ._dtype import (  # noqa: E402
    bfloat16,
    bool,
    can_cast,
    cdouble,
    cfloat,
    complex64,
    complex128,
    double,
    dtype,
    finfo,
    float,
    float16,
    float32,
    float64,
    get_default_dtype,
    half,
    iinfo,
    int,
    int8,
    int16,
    int32,
    int64,
    long,
    promote_types,
    result_type,
    set_default_dtype,
    short,
    uint8,
)
from ._tensor import Size, Tensor  # noqa: E402
from . import _meta  # noqa: E402,F401 - registers the meta device
from . import _ops  # noqa: E402
from ._creation import as_tensor, asarray, from_dlpack, from_numpy, tensor  # noqa: E402
from ._printing import get_printoptions, printoptions, set_printoptions  # noqa: E402
from ._grad_mode import (  # noqa: E402
    enable_grad,
    inference_mode,
    is_grad_enabled,
    is_inference_mode_enabled,
    no_grad,
    set_grad_enabled,
)
from ._ops._shapes import broadcast_shapes as _broadcast_shapes  # noqa: E402
from ._random import (  # noqa: E402
    Generator,
    default_generator,
    get_rng_state,
    initial_seed,
    manual_seed,
    seed,
    set_rng_state,
)
from . import random  # noqa: E402
from . import _tensor_methods  # noqa: E402

_tensor_methods.install()
from ._legacy_types import (  # noqa: E402 - PyTorch's legacy tensor types (ember.FloatTensor, ...)
    BFloat16Tensor,
    BoolTensor,
    ByteTensor,
    CharTensor,
    DoubleTensor,
    FloatTensor,
    HalfTensor,
    IntTensor,
    LongTensor,
    ShortTensor,
    set_default_tensor_type,
    typename,
)
from .serialization import SerializationError, load, save  # noqa: E402
from ._alloc import OutOfMemoryError  # noqa: E402,F401 - torch.OutOfMemoryError
from ._layout import layout, sparse_coo, sparse_csr, strided  # noqa: E402
from . import sparse  # noqa: E402
from .sparse import sparse_coo_tensor, sparse_csr_tensor, spmm  # noqa: E402

sparse._install()  # Tensor.to_sparse/to_dense/indices/..., ember.save of sparse tensors
from . import nn  # noqa: E402
from . import linalg  # noqa: E402 - ember.linalg (registry ops tagged "linalg")
from . import return_types  # noqa: E402,F401
from . import fft, signal  # noqa: E402,F401 - ember.fft (transforms) and ember.signal.windows
from ._spectral import (  # noqa: E402,F401 - torch.stft/istft and the legacy window functions
    bartlett_window,
    blackman_window,
    hamming_window,
    hann_window,
    istft,
    kaiser_window,
    stft,
)
from ._spectral import install_methods as _install_spectral_methods  # noqa: E402

_install_spectral_methods()  # Tensor.stft / Tensor.istft
globals().update(_ops.public_ops())
_standard_gamma = _ops.registry["_standard_gamma"]  # private in PyTorch too (torch._standard_gamma)
_standard_gamma_grad = _ops.registry["_standard_gamma_grad"]
from ._ops import foreach as _foreach  # noqa: E402 - PyTorch's torch._foreach_* list ops (not registry ops)

globals().update({_name: getattr(_foreach, _name) for _name in _foreach.__all__})
_where_op = where  # noqa: F821 - the registry op, exported by the update above


def where(condition, input=None, other=None, *, out=None):  # noqa: A002 - PyTorch's argument names
    """Elementwise choice ``where(condition, input, other)``, or the one-argument form ``where(condition)``.

    With ``input`` and ``other`` this is the registry op :data:`ember._ops.registry` ``["where"]``
    (``input`` where ``condition`` holds, else ``other``; all three broadcast). With ``condition``
    alone it is ``ember.nonzero(condition, as_tuple=True)``: a tuple of one int64 index tensor
    per dimension, as in PyTorch.

    Raises:
        TypeError: if only one of ``input`` and ``other`` is given.
        RuntimeError: if ``condition`` is not a bool (or uint8) tensor, or the shapes don't broadcast.

    Example:
        >>> import ember
        >>> x = ember.tensor([-1.0, 2.0, -3.0])
        >>> ember.where(x > 0, x, 0.0)
        tensor([0., 2., 0.])
        >>> ember.where(x > 0)
        (tensor([1]),)
    """
    if input is None and other is None and out is None:
        return nonzero(condition, as_tuple=True)  # noqa: F821 - a registry op
    if (input is None) != (other is None):
        raise TypeError("where() takes either condition alone or condition, input and other")
    if out is None:
        return _where_op(condition, input, other)
    return _where_op(condition, input, other, out=out)


def broadcast_shapes(*shapes):
    """The shape that ``shapes`` broadcast to, as an :class:`ember.Size`.

    Raises:
        RuntimeError: when two sizes differ and neither is 1.

    Example:
        >>> import ember
        >>> ember.broadcast_shapes((2, 1), (3,))
        ember.Size([2, 3])
    """
    # (``int`` in this module is the dtype ember.int32, hence builtins.int)
    return Size(_broadcast_shapes(*((s,) if isinstance(s, _builtins.int) else tuple(s) for s in shapes)))


def set_num_threads(num_threads):
    """Set the number of threads ember's C++ kernels (OpenMP) use for intra-op parallelism.

    numpy's BLAS keeps its own pool; limit it with ``threadpoolctl`` if needed. ember runs
    matrix products below about 16M multiply-adds on one BLAS thread whatever that pool's
    size, so that OpenBLAS's workers, which busy-wait after each call, leave the cores to
    the OpenMP kernels that come next; with ``num_threads`` 1 every product runs on one
    BLAS thread (as PyTorch's one thread bounds its BLAS too).

    Raises:
        ValueError: if ``num_threads`` is not positive.
    """
    _C.set_num_threads(num_threads)


def get_num_threads():
    """The number of threads ember's C++ kernels use for intra-op parallelism."""
    return _C.get_num_threads()


def is_tensor(obj):
    """Whether ``obj`` is an ember tensor (or a subclass)."""
    return isinstance(obj, Tensor)


def _tensor_argument(function, input):
    """``input``, which must be a tensor or stand for one (an FX proxy: a type with ``__ember_function__``).

    Raises:
        TypeError: "numel(): argument 'input' (position 1) must be Tensor, not list", as PyTorch words it.
    """
    if not isinstance(input, Tensor) and not hasattr(type(input), "__ember_function__"):
        raise TypeError(f"{function}(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    return input


def numel(input):
    """The number of elements of ``input``."""
    return _tensor_argument("numel", input).numel()


def is_floating_point(input):
    """Whether ``input`` has a floating-point dtype."""
    return _tensor_argument("is_floating_point", input).is_floating_point()


def is_complex(input):
    """Whether ``input`` has a complex dtype."""
    return _tensor_argument("is_complex", input).is_complex()


def compile(model=None, *, fullgraph=False, dynamic=None, backend="inductor", mode=None, options=None, disable=False):  # noqa: A001
    """Compile a function or module (provided by ember-dynamo).

    Raises:
        ember._extensions.MissingDistributionError: if ember-dynamo is not installed.
    """
    try:
        from ._dynamo import compile as dynamo_compile  # type: ignore[attr-defined]
    except ImportError as exc:
        # ember._dynamo itself absent (or hidden by the missing-distribution finder): name the distribution;
        # any other import error inside ember-dynamo is shown as it is
        if exc.name != "ember._dynamo" and getattr(exc, "distribution", None) != "ember-dynamo":
            raise
        from ._extensions import require

        require("ember.compile", "ember-dynamo")
    return dynamo_compile(
        model, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode, options=options, disable=disable
    )


def __getattr__(name):
    # ember.testing (assert_close, the sample registry) and ember.hub load on first use, keeping import fast.
    if name in ("testing", "hub", "distributions", "special", "profiler", "multiprocessing", "library", "ops",
                "compiler"):
        import importlib

        return importlib.import_module(f".{name}", __name__)
    # ember.optim, ember.fx, ... (other distributions): imported on first use; without
    # their distribution, MissingDistributionError says which to install.
    from ._extensions import provided_module

    module = provided_module(__name__, name)
    if module is not None:
        return module
    raise AttributeError(f"module 'ember' has no attribute '{name}'")


__version__ = "0.1.0"

from . import utils  # noqa: E402,F401 - ember.utils.data, ember.utils.checkpoint, ...
from . import cuda  # noqa: E402,F401 - ember.cuda (imports CuPy only on first use)
from ._autocast import (  # noqa: E402,F401 - torch.autocast and its state queries
    autocast, clear_autocast_cache, get_autocast_dtype, is_autocast_cache_enabled, is_autocast_enabled,
    set_autocast_cache_enabled, set_autocast_dtype, set_autocast_enabled,
)
from . import amp  # noqa: E402,F401 - ember.amp (autocast, GradScaler)
from ._default_device import get_default_device, set_default_device  # noqa: E402,F401
from ._deterministic import (  # noqa: E402,F401 - torch.use_deterministic_algorithms and its queries
    are_deterministic_algorithms_enabled, get_deterministic_debug_mode, is_deterministic_algorithms_warn_only_enabled,
    set_deterministic_debug_mode, use_deterministic_algorithms,
)
from .cuda import amp as _cuda_amp  # noqa: E402,F401 - makes ember.cuda.amp an attribute
from . import accelerator, backends, types  # noqa: E402,F401 - torch.accelerator / .backends / .types counterparts
from .backends import get_float32_matmul_precision, set_float32_matmul_precision  # noqa: E402,F401

# PyTorch's constants (torch.inf, torch.pi, ...). Near the end: no `except ... as e` after them can unbind `e`.
inf = _math.inf
nan = _math.nan
pi = _math.pi
e = _math.e
newaxis = None
from ._extensions import load_extensions as _load_extensions  # noqa: E402

_load_extensions()
