"""How tensors print: ``repr(t)`` and the global print options.

The text follows PyTorch's format character for character, so that output
pasted from a PyTorch session reads the same here (with ``torch`` spelled
``ember``)::

    tensor([[0.5000, 1.2500],
            [2.0000, 3.0000]], dtype=ember.float64, requires_grad=True)

The rules, in the order they are applied:

* **One number format per tensor.** Integer and bool tensors print their
  values as Python does. A floating tensor picks one of three styles by
  looking at its finite non-zero values: *integer style* (``1.``, ``-3.``)
  when every such value is a whole number; *scientific style*
  (``1.0000e-05``) when the largest magnitude is more than 1000 times the
  smallest, above ``1e8``, or (for non-integers) below ``1e-4``; otherwise
  *fixed style* with ``precision`` decimals (``0.5000``). ``sci_mode`` in the
  print options forces scientific style on or off. Every element is padded on
  the left to the width of the widest finite non-zero element, so columns
  line up; ``nan``, ``inf`` and zeros do not take part in choosing the style
  or the width. Complex tensors choose a format for the real parts and
  another for the imaginary parts and print ``a+bj``.
* **Summarisation.** A tensor with more than ``threshold`` elements shows
  only ``edgeitems`` entries at each end of every dimension, with ``...`` in
  between; the number format is chosen from the entries shown.
* **Layout.** Rows of a matrix go on separate lines aligned under the first
  bracket; each extra dimension adds one blank line between blocks. A 1-D row
  wraps when it would pass ``linewidth`` characters.
* **Suffixes.** ``device=`` when the tensor is not on the CPU, ``size=`` for
  empty and meta tensors (and whenever ``edgeitems`` is 0), ``dtype=`` when
  the dtype cannot be told from the printed values (anything but the default
  float dtype, its complex counterpart, int64 and bool; every non-default
  dtype for empty and meta tensors), then ``grad_fn=<...>`` or
  ``requires_grad=True``. A suffix that would pass ``linewidth`` goes on a
  new line.

Meta tensors have no values and print ``...`` in their place.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math

import numpy as np

from . import _dtype

__all__ = ["set_printoptions", "get_printoptions", "printoptions", "tensor_repr"]


@dataclasses.dataclass
class _PrintOptions:
    """The global print options; see :func:`set_printoptions`."""

    precision: int = 4
    threshold: float = 1000
    edgeitems: int = 3
    linewidth: int = 80
    sci_mode: bool | None = None


_OPTIONS = _PrintOptions()

# Named presets for set_printoptions(profile=...): precision, threshold, edgeitems, linewidth.
_PROFILES = {
    "default": {"precision": 4, "threshold": 1000, "edgeitems": 3, "linewidth": 80},
    "short": {"precision": 2, "threshold": 1000, "edgeitems": 2, "linewidth": 80},
    "full": {"precision": 4, "threshold": math.inf, "edgeitems": 3, "linewidth": 80},
}


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None, profile=None, sci_mode=None):
    """Set how tensors print, for the whole program (as ``torch.set_printoptions``).

    A ``profile`` sets ``precision``, ``threshold``, ``edgeitems`` and
    ``linewidth`` together; any of those passed explicitly then override it.
    Options left as ``None`` keep their current value, except ``sci_mode``,
    which is always set (``None`` means "choose automatically"), as in
    PyTorch.

    Args:
        precision (int, optional): digits after the decimal point for floating
            values (default 4).
        threshold (int or float, optional): tensors with more elements than
            this are summarised with ``...`` (default 1000; ``math.inf`` never
            summarises).
        edgeitems (int, optional): entries shown at each end of every
            dimension of a summarised tensor (default 3).
        linewidth (int, optional): characters per line before a row of values
            or a suffix wraps (default 80).
        profile (str, optional): ``"default"`` (4, 1000, 3, 80), ``"short"``
            (2, 1000, 2, 80) or ``"full"`` (4, ``inf``, 3, 80): presets for
            the four options above.
        sci_mode (bool, optional): ``True`` forces scientific notation for
            floating values, ``False`` forbids it, ``None`` (default) lets each
            tensor choose from the magnitude of its values.

    Raises:
        ValueError: if ``profile`` is not one of the names above.

    Example:
        >>> import ember
        >>> ember.set_printoptions(precision=2)
        >>> ember.tensor([1.12345])
        tensor([1.12])
        >>> ember.set_printoptions(threshold=5)
        >>> ember.arange(10)
        tensor([0, 1, 2,  ..., 7, 8, 9])
        >>> ember.set_printoptions(profile="default")
        >>> ember.tensor([1.12345])
        tensor([1.1235])
    """
    if profile is not None:
        if profile not in _PROFILES:
            raise ValueError(f"set_printoptions: profile must be one of {sorted(_PROFILES)}, got {profile!r}")
        for name, value in _PROFILES[profile].items():
            setattr(_OPTIONS, name, value)
    if precision is not None:
        _OPTIONS.precision = precision
    if threshold is not None:
        _OPTIONS.threshold = threshold
    if edgeitems is not None:
        _OPTIONS.edgeitems = edgeitems
    if linewidth is not None:
        _OPTIONS.linewidth = linewidth
    _OPTIONS.sci_mode = sci_mode


def get_printoptions():
    """The current print options, as keyword arguments for :func:`set_printoptions`.

    Returns:
        dict: a new dict with the keys ``precision``, ``threshold``,
        ``edgeitems``, ``linewidth`` and ``sci_mode``.

    Example:
        >>> import ember
        >>> ember.get_printoptions()
        {'precision': 4, 'threshold': 1000, 'edgeitems': 3, 'linewidth': 80, 'sci_mode': None}
    """
    return dataclasses.asdict(_OPTIONS)


@contextlib.contextmanager
def printoptions(**kwargs):
    """A context manager that changes the print options and restores them on exit.

    Args:
        **kwargs: the keyword arguments of :func:`set_printoptions`. As there,
            ``sci_mode`` not given means automatic inside the block.

    Yields:
        None

    Raises:
        TypeError: for a keyword :func:`set_printoptions` does not accept.
        ValueError: for an unknown ``profile``.

    Example:
        >>> import ember
        >>> with ember.printoptions(precision=1, sci_mode=True):
        ...     ember.tensor([0.5, 12.25])
        tensor([5.0e-01, 1.2e+01])
        >>> ember.tensor([0.5, 12.25])
        tensor([ 0.5000, 12.2500])
    """
    saved = get_printoptions()
    set_printoptions(**kwargs)
    try:
        yield
    finally:
        set_printoptions(**saved)


# ---------------------------------------------------------------------------
# Number formats


class _NumberFormat:
    """How every element of one tensor (or of its real or imaginary parts) is written.

    Built once from the values that will be shown, so that all elements share
    a style and a width.

    Args:
        values (numpy.ndarray): the values that will be printed (already
            summarised); bool, integer or floating.
        options (_PrintOptions): the print options in force.
    """

    def __init__(self, values, options):
        self.precision = options.precision
        self.is_floating = values.dtype.kind == "f"
        self.int_style = True
        self.sci_style = False
        self.width = 1
        flat = values.reshape(-1)

        if not self.is_floating:
            for value in flat.tolist():
                self.width = max(self.width, len(str(value)))
            return

        shown = flat[np.isfinite(flat) & (flat != 0)]
        if shown.size == 0:
            # Only zeros, nan and inf: integer style, and sci_mode is not consulted.
            return

        magnitudes = np.abs(shown).astype(np.float64)
        smallest, largest = float(magnitudes.min()), float(magnitudes.max())
        self.int_style = bool(np.all(shown == np.ceil(shown)))
        if options.sci_mode is None:
            with np.errstate(over="ignore"):
                spread = np.float64(largest) / np.float64(smallest)
            self.sci_style = bool(spread > 1000.0 or largest > 1.0e8 or smallest < 1.0e-4)
        else:
            self.sci_style = bool(options.sci_mode)

        if self.sci_style:
            lengths = (len(f"{v:.{self.precision}e}") for v in shown.tolist())
        elif self.int_style:
            # One more character for the "." that marks the values as floating.
            lengths = (len(f"{v:.0f}") + 1 for v in shown.tolist())
        else:
            lengths = (len(f"{v:.{self.precision}f}") for v in shown.tolist())
        self.width = max(self.width, max(lengths))

    def format(self, value):
        """One element (a Python bool, int or float) as text, padded on the left to the shared width."""
        if not self.is_floating:
            text = str(value)
        elif self.sci_style:
            text = f"{value:.{self.precision}e}"
        elif self.int_style:
            text = f"{value:.0f}"
            if math.isfinite(value):
                text += "."
        else:
            text = f"{value:.{self.precision}f}"
        return text.rjust(self.width)


class _ComplexFormat:
    """Writes complex elements as ``real+imagj`` with one format per part."""

    def __init__(self, real_format, imag_format):
        self.real = real_format
        self.imag = imag_format
        # The imaginary part takes one more character, for the "j".
        self.width = real_format.width + imag_format.width + 1

    def format(self, value):
        real_text = self.real.format(value.real)
        imag_text = (self.imag.format(value.imag) + "j").lstrip()
        if imag_text[0] in "+-":  # a sign already separates the parts (also for -0.)
            return real_text + imag_text
        return real_text + "+" + imag_text


def _summary(values, edgeitems):
    """The entries a summarised print shows: ``edgeitems`` at each end of every dimension.

    Only used to choose the number format, so the result need not keep the
    original shape.
    """
    if values.ndim == 0:
        return values
    if values.ndim == 1:
        if values.shape[0] > 2 * edgeitems:
            return np.concatenate((values[:edgeitems], values[-edgeitems:]))
        return values
    if not edgeitems:
        return np.empty((0,) * values.ndim, dtype=values.dtype)
    rows = _shown_rows(values.shape[0], edgeitems, summarize=True)
    return np.stack([_summary(values[i], edgeitems) for i in rows if i is not None])


def _shown_rows(length, edgeitems, summarize):
    """Indices of the rows to print along one dimension; ``None`` stands for the ``...`` row."""
    if summarize and length > 2 * edgeitems:
        return [*range(edgeitems), None, *range(length - edgeitems, length)]
    return list(range(length))


# ---------------------------------------------------------------------------
# Layout


def _format_vector(values, indent, summarize, number_format, options):
    """A 1-D array as ``[a, b, c]``, wrapped to the line width."""
    # Each element takes its width plus ", ".
    element_length = number_format.width + 2
    per_line = max(1, math.floor((options.linewidth - indent) / element_length))

    if summarize and not options.edgeitems:
        items = ["..."]
    elif summarize and values.shape[0] > 2 * options.edgeitems:
        head = values[: options.edgeitems].tolist()
        tail = values[-options.edgeitems :].tolist()
        items = [number_format.format(v) for v in head] + [" ..."] + [number_format.format(v) for v in tail]
    else:
        items = [number_format.format(v) for v in values.tolist()]

    lines = [", ".join(items[start : start + per_line]) for start in range(0, len(items), per_line)]
    return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"


def _format_array(values, indent, summarize, number_format, options):
    """The bracketed text of ``values``, whose first bracket sits at column ``indent``."""
    if values.ndim == 0:
        return number_format.format(values.item())
    if values.ndim == 1:
        return _format_vector(values, indent, summarize, number_format, options)
    blocks = []
    for row in _shown_rows(values.shape[0], options.edgeitems, summarize):
        if row is None:
            blocks.append("...")
        else:
            blocks.append(_format_array(values[row], indent + 1, summarize, number_format, options))
    separator = "," + "\n" * (values.ndim - 1) + " " * (indent + 1)
    return "[" + separator.join(blocks) + "]"


def _format_values(values, indent, options):
    """The bracketed text of a non-empty array, with its number format chosen first."""
    summarize = values.size > options.threshold
    if values.dtype.kind == "c":
        real_values = _summary(values.real, options.edgeitems) if summarize else values.real
        imag_values = _summary(values.imag, options.edgeitems) if summarize else values.imag
        number_format = _ComplexFormat(_NumberFormat(real_values, options), _NumberFormat(imag_values, options))
    else:
        number_format = _NumberFormat(_summary(values, options.edgeitems) if summarize else values, options)
    return _format_array(values, indent, summarize, number_format, options)


def _host_values(t):
    """The tensor's values as a numpy array that the formatting code understands."""
    values = np.asarray(t._host_array())
    if t.dtype in (_dtype.float16, _dtype.bfloat16):
        # Exact: every half and bfloat16 value is a float32 value.
        values = values.astype(np.float32)
    return values


def _add_suffixes(text, suffixes, indent, options):
    """Append ``, suffix`` items and the closing parenthesis, starting a new line before one that would not fit."""
    parts = [text]
    # Kept as PyTorch counts it (two more than the last line's length), so lines break where PyTorch breaks them.
    line_length = len(text) - text.rfind("\n") + 1
    for suffix in suffixes:
        if line_length + len(suffix) + 2 > options.linewidth:
            parts.append(",\n" + " " * indent + suffix)
            line_length = indent + len(suffix)
        else:
            parts.append(", " + suffix)
            line_length += len(suffix) + 2
    parts.append(")")
    return "".join(parts)


def _prefix(t):
    """``tensor(`` for plain tensors and parameters, ``ClassName(`` for other subclasses."""
    from ._tensor import Tensor

    cls = type(t)
    if cls is Tensor or (cls.__name__ == "Parameter" and cls.__module__.startswith("ember")):
        return "tensor("
    return f"{cls.__name__}("


def _grad_fn_name(t):
    """The autograd node's name for ``grad_fn=<...>``, or None for a leaf."""
    try:
        node = t.grad_fn
    except RuntimeError:
        return "Invalid"
    if node is None:
        return None
    name = getattr(node, "name", None)
    if callable(name):
        return str(name()).rsplit("::", 1)[-1]
    return type(node).__name__


def tensor_repr(t, *, tensor_contents=None):
    """The text ``repr(t)`` and ``str(t)`` show, in PyTorch's format.

    Uses the options set by :func:`set_printoptions`. Meta tensors are
    described without touching data.

    Args:
        t (Tensor): the tensor to print.
        tensor_contents (str, optional): text to print in place of the values
            (PyTorch's hook for wrapper tensors); the suffixes are still added.

    Returns:
        str: for example ``"tensor([1., 2.], dtype=ember.float64)"``.

    Example:
        >>> import ember
        >>> ember.tensor([[1, 2], [3, 40]])
        tensor([[ 1,  2],
                [ 3, 40]])
        >>> ember.tensor([1e-5, 1e5])
        tensor([1.0000e-05, 1.0000e+05])
        >>> ember.tensor([True, False])
        tensor([ True, False])
        >>> ember.zeros((0, 3), dtype=ember.int64)
        tensor([], size=(0, 3), dtype=ember.int64)
        >>> ember.empty((2, 3), device="meta")
        tensor(..., device='meta', size=(2, 3))
    """
    options = _OPTIONS
    prefix = _prefix(t)
    indent = len(prefix)
    default_dtype = _dtype.get_default_dtype()
    default_complex = _dtype.complex128 if default_dtype is _dtype.float64 else _dtype.complex64
    dtype = t.dtype
    shape = tuple(t.shape)
    numel = math.prod(shape)
    suffixes = []

    if t.device.type != "cpu":
        suffixes.append(f"device='{t.device}'")

    if t.device.type == "meta":
        suffixes.append(f"size={shape}")
        if dtype is not default_dtype:
            suffixes.append(f"dtype={dtype}")
        text = "..."
    elif numel == 0:
        if len(shape) != 1:
            suffixes.append(f"size={shape}")
        # No values to tell an int64 or bool tensor from a float one: always name a non-default dtype.
        if dtype is not default_dtype:
            suffixes.append(f"dtype={dtype}")
        text = "[]"
    else:
        if not options.edgeitems:
            suffixes.append(f"size={shape}")
        if dtype not in (default_dtype, default_complex, _dtype.int64, _dtype.bool):
            suffixes.append(f"dtype={dtype}")
        text = None if tensor_contents is not None else _format_values(_host_values(t), indent, options)
    if tensor_contents is not None:
        text = tensor_contents

    grad_fn_name = _grad_fn_name(t)
    if grad_fn_name is not None:
        suffixes.append(f"grad_fn=<{grad_fn_name}>")
    elif t.requires_grad:
        suffixes.append("requires_grad=True")

    return _add_suffixes(prefix + text, suffixes, indent, options)
