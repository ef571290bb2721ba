"""The Tensor class: metadata over one backend array.

A tensor holds a backend array (``numpy.ndarray`` on CPU, a CuPy array on
CUDA, a :class:`~ember._meta.MetaArray` on meta) that views its storage, and
the autograd fields. Everything that computes goes through the op registry;
the operator methods (``__add__``, ``sum``, ``view``, ...) are attached by
:mod:`ember._tensor_methods` once the ops exist.
"""

from __future__ import annotations

import numpy as np

from . import _extensions
from ._device import CPU, get_backend
from ._dtype import COMPLEX, FLOATING, from_numpy_dtype
from ._layout import strided as _strided
from ._meta import MetaArray, contiguous_strides
from ._storage import array_data_ptr, storage_of

__all__ = ["Tensor", "Size"]


class Size(tuple):
    """The shape of a tensor: a tuple of ints that prints as ``ember.Size([2, 3])``."""

    __slots__ = ()

    def numel(self):
        """The number of elements of a tensor of this shape."""
        n = 1
        for s in self:
            n *= s
        return n

    def __repr__(self):
        return f"ember.Size([{', '.join(str(s) for s in self)}])"

    def __getitem__(self, key):
        result = tuple.__getitem__(self, key)
        return Size(result) if isinstance(key, slice) else result

    def __add__(self, other):
        return Size(tuple.__add__(self, tuple(other)))



def _check_value_read(what):
    """Let active dispatch modes refuse a read of tensor values into Python (a tracer would bake the value in).

    A mode with a ``refuse_value_read(what)`` method (make_fx's tracer) raises there; ``bool()``,
    ``float()``, ``int()`` and ``tolist()`` of a tensor all come through ``item()``/``tolist()``.
    """
    from ._ops._dispatch import state

    for mode in state.modes:
        refuse = getattr(mode, "refuse_value_read", None)
        if refuse is not None:
            refuse(what)

class Tensor:
    """A multi-dimensional array with autograd metadata, PyTorch's ``torch.Tensor``.

    Create tensors with :func:`ember.tensor`, :func:`ember.zeros`,
    :func:`ember.from_numpy` and the other creation functions rather than with
    this class directly.

    Attributes:
        shape (Size): sizes of each dimension.
        dtype (ember.dtype): element type.
        device (ember.device): where the data lives.
        requires_grad (bool): whether autograd records operations on it.
        grad (Tensor or None): accumulated gradient of a leaf.
        grad_fn: the autograd node that produced it (None for leaves).
    """

    # Class-level defaults keep creation cheap: a new tensor sets only what differs.
    _storage = None
    _base = None
    _strides = None  # cached element strides (set by views, computed once otherwise)
    _offset = None  # cached storage offset in elements
    _requires_grad = False
    _grad = None
    _grad_fn = None  # the autograd node that produced it (see the grad_fn property)
    _output_nr = 0  # which output of _grad_fn it is
    _view_info = None  # set by ember-autograd on differentiable views: (base, version when grad_fn was made)
    _nondiff_view = False  # a view autograd does not track through (detach, .data)
    _grad_accumulator = None  # ember-autograd: weak reference to a leaf's AccumulateGrad node
    _ember_tensor = True

    def __init__(self, *args, **kwargs):
        raise TypeError(
            "ember.Tensor cannot be constructed directly; use ember.tensor(data), ember.empty(size) "
            "or another creation function"
        )

    # -- construction helpers (internal) -----------------------------------

    @classmethod
    def _make(cls, array, device=CPU):
        """Wrap a backend array that owns its memory (or that nothing else views)."""
        t = object.__new__(cls)
        t._data = array
        t._device = device
        return t

    @classmethod
    def _make_view(cls, array, base, strides=None, offset=None):
        """Wrap a backend array that views ``base``'s storage (with its strides and offset, when known)."""
        t = object.__new__(cls)
        t._data = array
        t._device = base._device
        t._storage = storage_of(base)
        t._base = base._base if base._base is not None else base
        if strides is not None:
            t._strides = strides
            t._offset = offset
        return t

    def _set_data(self, array, storage=None):
        """Point this tensor at another backend array (``.data = ...``, resizing ``out=``)."""
        self._data = array
        self._storage = storage
        self._strides = self._offset = None

    # -- metadata -------------------------------------------------------------

    @property
    def shape(self):
        return Size(self._data.shape)

    def size(self, dim=None):
        """The shape, or the size of dimension ``dim``.

        Raises:
            IndexError: if ``dim`` is out of range.
        """
        if dim is None:
            return Size(self._data.shape)
        return self._data.shape[_wrap_dim(dim, self._data.ndim)]

    @property
    def dtype(self):
        return from_numpy_dtype(self._data.dtype)

    @property
    def device(self):
        return self._device

    @property
    def ndim(self):
        return self._data.ndim

    def dim(self):
        """The number of dimensions."""
        return self._data.ndim

    ndimension = dim

    def numel(self):
        """The number of elements."""
        return int(self._data.size)

    nelement = numel

    def element_size(self):
        """Bytes per element."""
        return self._data.dtype.itemsize

    @property
    def itemsize(self):
        return self._data.dtype.itemsize

    @property
    def nbytes(self):
        return int(self._data.size) * self._data.dtype.itemsize

    def stride(self, dim=None):
        """Strides in elements, or the stride of dimension ``dim``.

        Raises:
            IndexError: if ``dim`` is out of range.
        """
        strides = self._strides
        if strides is None:
            data = self._data
            if type(data) is MetaArray:
                strides = tuple(data._elem_strides)
            elif data.size == 0:  # numpy reports zero strides for empty arrays; PyTorch row-major ones
                strides = contiguous_strides(data.shape)
            else:
                itemsize = data.dtype.itemsize
                strides = tuple(s // itemsize for s in data.strides)
            self._strides = strides
        if dim is None:
            return strides
        return strides[_wrap_dim(dim, self._data.ndim)]

    def storage_offset(self):
        """Offset of the first element in the storage, in elements."""
        offset = self._offset
        if offset is None:
            array = self._data
            if type(array) is MetaArray:
                offset = array.offset
            elif type(array) is np.ndarray and array.base is None and (
                self._storage is None or self._storage._source is array
            ):
                # an array that owns its memory starts its storage (which is then not built, or not resolved,
                # to ask it: autograd's saved outputs and sum's saved input metadata ask this of most outputs)
                offset = 0
            else:
                offset = (array_data_ptr(array) - storage_of(self).data_ptr()) // array.dtype.itemsize
            self._offset = offset
        return offset

    def untyped_storage(self):
        """The :class:`~ember._storage.Storage` this tensor views."""
        return storage_of(self)

    def share_memory_(self):
        """Move the data into shared memory, in place (see :mod:`ember.multiprocessing`); returns self."""
        from .multiprocessing._shared import share_memory_

        return share_memory_(self)

    def is_shared(self):
        """Whether the data lives in shared memory (see :mod:`ember.multiprocessing`)."""
        from .multiprocessing._shared import is_shared

        return is_shared(self)

    def data_ptr(self):
        """Address of the first element (0 on meta)."""
        if type(self._data) is MetaArray:
            return 0
        return array_data_ptr(self._data)

    def is_contiguous(self, memory_format=None):
        """Whether the elements are laid out row-major without gaps (size-1 dims ignored)."""
        return is_contiguous_strides(self._data.shape, self.stride())

    def is_floating_point(self):
        return self.dtype.category == FLOATING

    def is_complex(self):
        return self.dtype.category == COMPLEX

    @property
    def is_meta(self):
        return self._device.type == "meta"

    @property
    def is_cpu(self):
        return self._device.type == "cpu"

    @property
    def is_cuda(self):
        return self._device.type == "cuda"

    # PyTorch's other device predicates (is_xpu, is_mps, ...): see _device_predicate below the class.

    @property
    def layout(self):
        """How the elements are stored: ``ember.strided`` (sparse tensors: ``sparse_coo``/``sparse_csr``)."""
        return _strided

    @property
    def is_sparse(self):
        """Whether this is a sparse COO tensor (see :mod:`ember.sparse`)."""
        return False

    @property
    def is_sparse_csr(self):
        """Whether this is a sparse CSR tensor (see :mod:`ember.sparse`)."""
        return False

    def get_device(self):
        """The device index, or -1 on CPU."""
        return -1 if self._device.index is None else self._device.index

    @property
    def _version(self):
        storage = self._storage
        return 0 if storage is None else storage.version

    def _bump_version(self):
        storage_of(self).version += 1

    # -- autograd fields ------------------------------------------------------

    @property
    def requires_grad(self):
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value):
        self.requires_grad_(value)

    def requires_grad_(self, requires_grad=True):
        """Set whether autograd records operations on this tensor; returns ``self``.

        Raises:
            RuntimeError: for integer/bool tensors, or when turning it off on a non-leaf.
        """
        requires_grad = bool(requires_grad)
        if requires_grad and self.dtype.category < FLOATING:
            raise RuntimeError("only Tensors of floating point and complex dtype can require gradients")
        if not requires_grad and self._grad_fn is not None:
            raise RuntimeError(
                "you can only change requires_grad flags of leaf variables. If you want to use a computed "
                "variable in a subgraph that doesn't require differentiation use var_no_grad = var.detach()."
            )
        self._requires_grad = requires_grad
        return self

    @property
    def grad(self):
        """The gradient accumulated into this leaf by backward (None until then); warns on a non-leaf."""
        if self._grad_fn is not None and self._grad is None and not self.__dict__.get("_retains_grad"):
            import warnings

            warnings.warn(
                "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad attribute "
                "won't be populated during autograd.backward(). If you indeed want the .grad field to be populated "
                "for a non-leaf Tensor, use .retain_grad() on the non-leaf Tensor. If you access the non-leaf Tensor "
                "by mistake, make sure you access the leaf Tensor instead.",
                UserWarning,
                stacklevel=2,
            )
        return self._grad

    @grad.setter
    def grad(self, value):
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(f"assigned grad expected to be a Tensor or None but got {type(value).__name__}")
            if value._data.shape != self._data.shape:
                raise RuntimeError(
                    f"assigned grad has data of a different size: expected {list(self._data.shape)}, "
                    f"got {list(value._data.shape)}"
                )
            if value.dtype is not self.dtype:
                raise RuntimeError(
                    f"assigned grad has data of a different type: expected {self.dtype}, got {value.dtype}"
                )
            if value._device != self._device:
                raise RuntimeError(
                    "assigned grad has data located on a different device: "
                    f"expected {self._device}, got {value._device}"
                )
        self._grad = value

    @grad.deleter
    def grad(self):
        self._grad = None

    @property
    def grad_fn(self):
        """The autograd node that produced this tensor, or None for a leaf."""
        if self._view_info is not None:  # a view whose base was modified in place since
            return _extensions.autograd.view_grad_fn(self)
        return self._grad_fn

    @grad_fn.setter
    def grad_fn(self, node):
        self._grad_fn = node

    @property
    def is_leaf(self):
        """Whether no autograd node produced this tensor (created by the user, or not requiring grad)."""
        return self._grad_fn is None

    def register_post_accumulate_grad_hook(self, hook):
        """Call ``hook(tensor)`` after a gradient is accumulated into this leaf's ``.grad`` (needs ember-autograd)."""
        return _extensions.autograd.register_post_accumulate_grad_hook(self, hook)

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        """Accumulate gradients of this tensor into the leaves (needs ember-autograd)."""
        return _extensions.autograd.backward(self, gradient, retain_graph, create_graph, inputs)

    def register_hook(self, hook):
        """Register a gradient hook (needs ember-autograd)."""
        return _extensions.autograd.register_hook(self, hook)

    def retain_grad(self):
        """Keep ``.grad`` of a non-leaf after backward (needs ember-autograd)."""
        return _extensions.autograd.retain_grad(self)

    # -- conversion to Python and numpy ----------------------------------------

    def numpy(self, *, force=False):
        """The values as a numpy array; shares memory on CPU.

        Raises:
            RuntimeError: if the tensor requires grad while grad mode is on (unless ``force``), or is not on CPU
                (unless ``force``, which copies), or is on meta.
        """
        if self._requires_grad and not force and _grad_enabled():
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.")
        if self._device.type != "cpu":
            if not force:
                raise TypeError(
                    f"can't convert {self._device} device type tensor to numpy. Use Tensor.cpu() to copy the tensor "
                    "to host memory first."
                )
            return get_backend(self._device.type).to_numpy(self._data)
        return self._data

    def __array__(self, dtype=None, copy=None):
        if self._requires_grad and _grad_enabled():
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.")
        array = self.numpy(force=True) if self._device.type != "cpu" else self._data
        if dtype is not None and array.dtype != dtype:
            return array.astype(dtype)
        if copy:
            return array.copy()
        return array

    def _host_array(self):
        """The values as a numpy array, copying from the device if needed."""
        if self._device.type == "cpu":
            return self._data
        return get_backend(self._device.type).to_numpy(self._data)

    def item(self):
        """The value of a one-element tensor as a Python number.

        Raises:
            RuntimeError: if the tensor has more or fewer than one element, or is on meta.
        """
        n = self._data.size
        if n != 1:
            raise RuntimeError(f"a Tensor with {n} elements cannot be converted to Scalar")
        if self._device.type == "meta":
            raise RuntimeError("Tensor.item() cannot be called on meta tensors")
        _check_value_read("Tensor.item()")
        value = self._host_array().reshape(()).item()
        if not isinstance(value, (bool, int, float, complex)):  # bfloat16 and friends
            value = float(value)
        return value

    def tolist(self):
        """The values as (nested) Python lists of numbers; a zero-dim tensor gives a number."""
        _check_value_read("Tensor.tolist()")
        array = self._host_array()
        if array.dtype.kind == "V" or array.dtype.name == "bfloat16":
            array = array.astype(np.float32)
        return array.tolist()

    def __len__(self):
        if self._data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    def __iter__(self):
        if self._data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return iter(self.unbind(0))

    def __bool__(self):
        n = self._data.size
        if n != 1:
            if n == 0:
                raise RuntimeError("Boolean value of Tensor with no values is ambiguous")
            raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
        return bool(self.item())

    def _scalar(self):
        if self._data.size != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        return self.item()

    def __float__(self):
        return float(self._scalar())

    def __int__(self):
        return int(self._scalar())

    def __complex__(self):
        return complex(self._scalar())

    def __index__(self):
        if self.dtype.category != 1 or self._data.size != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __format__(self, format_spec):
        if self._data.ndim == 0 and self._device.type != "meta":
            return self.item().__format__(format_spec)
        return object.__format__(str(self), format_spec)

    __hash__ = object.__hash__

    def __repr__(self, *, tensor_contents=None):
        from ._printing import tensor_repr

        return tensor_repr(self)

    def __dlpack__(self, stream=None, **kwargs):
        if self._requires_grad:
            raise BufferError("Can't export tensors that require gradient, use tensor.detach()")
        return self._data.__dlpack__(**({"stream": stream} if stream is not None else {}), **kwargs)

    def __dlpack_device__(self):
        return self._data.__dlpack_device__()

    def __reduce_ex__(self, protocol):
        raise TypeError("ember tensors are not picklable; use ember.save/ember.load (safetensors-based) instead")

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        result = self.detach().clone()
        if self._requires_grad:
            result.requires_grad_(True)
        if self._grad is not None:
            result._grad = self._grad.__deepcopy__(memo)
        result.__dict__.update({k: v for k, v in self.__dict__.items() if k not in _TENSOR_CORE_FIELDS})
        memo[id(self)] = result
        return result

    # -- __ember_function__ ----------------------------------------------------

    @classmethod
    def __ember_function__(cls, func, types, args=(), kwargs=None):
        """Default override behaviour for subclasses: run ``func``, keep the subclass.

        Subclasses override this classmethod to intercept every public function
        and method call, as with PyTorch's ``__torch_function__``.
        """
        from .overrides import _default_ember_function

        return _default_ember_function(cls, func, types, args, kwargs)

    def as_subclass(self, cls):
        """A tensor of subclass ``cls`` sharing this tensor's data and metadata."""
        t = object.__new__(cls)
        t.__dict__.update(self.__dict__)
        t._storage = storage_of(self)
        return t


_TENSOR_CORE_FIELDS = {
    "_data", "_device", "_storage", "_base", "_requires_grad", "_grad", "_grad_fn", "_output_nr", "_view_info",
    "_nondiff_view", "_grad_accumulator", "_strides", "_offset",
}


def _grad_enabled():
    from ._ops._dispatch import state  # the dispatcher imports this module

    return state.grad_enabled


def _wrap_dim(dim, ndim):
    """Normalise a possibly negative dimension index.

    Raises:
        IndexError: naming the valid range when ``dim`` is out of it.
    """
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
    return dim + n if dim < 0 else dim


def _device_predicate(device_type):
    def predicate(self):
        return self._device.type == device_type

    predicate.__name__ = f"is_{device_type}"
    predicate.__doc__ = f"Whether this tensor is on a '{device_type}' device (PyTorch's Tensor.is_{device_type})."
    return property(predicate)


#: Device types PyTorch has a ``Tensor.is_<type>`` property for, beyond cpu/cuda/meta. Ember has no
#: built-in backend for them, so they are False unless an out-of-tree device of that name is
#: registered (ember.utils.backend_registration).
PREDICATE_DEVICE_TYPES = ("xpu", "mps", "ipu", "hpu", "maia", "mtia", "vulkan", "xla")
for _type in PREDICATE_DEVICE_TYPES:
    setattr(Tensor, f"is_{_type}", _device_predicate(_type))
del _type
# MKL-DNN (oneDNN) is a tensor layout in PyTorch; ember has no such layout.
Tensor.is_mkldnn = property(lambda self: False, doc="Always False: ember has no MKL-DNN (oneDNN) tensor layout.")


def is_contiguous_strides(shape, strides):
    """Whether ``strides`` (elements) are row-major for ``shape``, ignoring size-1 dims."""
    expected = 1
    for n, s in zip(reversed(shape), reversed(strides)):
        if n == 0:
            return True
        if n != 1:
            if s != expected:
                return False
            expected *= n
    return True
