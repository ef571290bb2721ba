"""Variable-length sequence utilities for recurrent layers, as in ``torch.nn.utils.rnn``.

A :class:`PackedSequence` stores a batch of sequences of different lengths time-major without padding:
``data`` holds, step after step, the rows of the sequences still running at that step (sequences sorted by
decreasing length), and ``batch_sizes[t]`` says how many rows step ``t`` has. ``RNN``/``LSTM``/``GRU``
accept one and return one. Everything here is written with ember ops (slicing, ``cat``, ``stack``,
``index_select``), so gradients flow through packing and padding.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

import ember

__all__ = [
    "PackedSequence",
    "invert_permutation",
    "pack_padded_sequence",
    "pad_packed_sequence",
    "pad_sequence",
    "unpad_sequence",
    "pack_sequence",
    "unpack_sequence",
]


class PackedSequence_(NamedTuple):
    data: ember.Tensor
    batch_sizes: ember.Tensor
    sorted_indices: ember.Tensor | None
    unsorted_indices: ember.Tensor | None


def _bind(optional, fn):
    return None if optional is None else fn(optional)


class PackedSequence(PackedSequence_):
    """Data and list of ``batch_sizes`` of a packed batch of sequences (a named tuple).

    Do not build one by hand; use :func:`pack_padded_sequence` or :func:`pack_sequence`.

    Attributes:
        data (Tensor): ``(sum(lengths), *)``, the packed rows, step after step.
        batch_sizes (Tensor): int64 CPU tensor ``(max(lengths),)``, the number of rows of each step
            (non-increasing).
        sorted_indices (Tensor, optional): the permutation that sorted the original batch by decreasing
            length (``None`` when the input was already sorted, ``enforce_sorted=True``).
        unsorted_indices (Tensor, optional): its inverse, restoring the original order.

    Raises:
        ValueError: ``batch_sizes`` not on the CPU.

    Example:
        >>> import ember
        >>> from ember.nn.utils.rnn import pack_sequence
        >>> p = pack_sequence([ember.tensor([1, 2, 3]), ember.tensor([4, 5])])
        >>> p.data.tolist(), p.batch_sizes.tolist()
        ([1, 4, 2, 5, 3], [2, 2, 1])
    """

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        return super().__new__(cls, *_packed_sequence_init_args(data, batch_sizes, sorted_indices, unsorted_indices))

    def pin_memory(self):
        """Return ``self``: ember's CPU tensors need no pinning."""
        return self

    def to(self, *args, **kwargs):
        """Move/cast ``data`` (and the index tensors to ``data``'s new device); ``batch_sizes`` stays on the CPU.

        Returns ``self`` when ``data`` is unchanged."""
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self
        sorted_indices = _bind(self.sorted_indices, lambda t: t.to(data.device))
        unsorted_indices = _bind(self.unsorted_indices, lambda t: t.to(data.device))
        return type(self)(data, self.batch_sizes, sorted_indices, unsorted_indices)

    def cuda(self, *args, **kwargs):
        """Move ``data`` to a CUDA device (see :meth:`to`)."""
        kwargs.setdefault("device", "cuda")
        return self.to(*args, **kwargs)

    def cpu(self, *args, **kwargs):
        """Move ``data`` to the CPU (see :meth:`to`)."""
        kwargs.setdefault("device", "cpu")
        return self.to(*args, **kwargs)

    def double(self):
        return self.to(dtype=ember.float64)

    def float(self):
        return self.to(dtype=ember.float32)

    def half(self):
        return self.to(dtype=ember.float16)

    def long(self):
        return self.to(dtype=ember.int64)

    def int(self):
        return self.to(dtype=ember.int32)

    def short(self):
        return self.to(dtype=ember.int16)

    def char(self):
        return self.to(dtype=ember.int8)

    def byte(self):
        return self.to(dtype=ember.uint8)

    @property
    def is_cuda(self):
        """Whether ``data`` lives on a CUDA device."""
        return self.data.is_cuda

    def is_pinned(self):
        """Always ``False``: ember has no pinned memory."""
        return False


def _packed_sequence_init_args(data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
    if unsorted_indices is None:
        unsorted_indices = invert_permutation(sorted_indices)
    if batch_sizes is not None:
        if batch_sizes.device.type != "cpu":
            raise ValueError(
                "batch_sizes should always be on CPU. "
                "Instances of PackedSequence should never be created manually. "
                "They should be instantiated by functions like pack_sequence "
                "and pack_padded_sequences in nn.utils.rnn. "
                "https://pytorch.org/docs/stable/nn.html#torch.nn.utils.rnn.pack_sequence"
            )
        return data, batch_sizes, sorted_indices, unsorted_indices
    if not (isinstance(data, (list, tuple)) and len(data) == 2):
        raise AssertionError("Expected data to be a list or tuple of length 2")
    return data[0], data[1], sorted_indices, unsorted_indices


def invert_permutation(permutation):
    """Return the inverse of the 1-D index tensor ``permutation`` (``None`` for ``None``):
    ``out[permutation[i]] = i``."""
    if permutation is None:
        return None
    return ember.argsort(permutation)


def _runs(batch_sizes):
    """Group equal consecutive batch sizes: ``[3, 3, 2, 1, 1] -> [(3, 2), (2, 1), (1, 2)]``."""
    runs = []
    for b in batch_sizes:
        if runs and runs[-1][0] == b:
            runs[-1][1] += 1
        else:
            runs.append([b, 1])
    return runs


def _pack_padded(input, lengths, batch_first):
    if batch_first:
        input = input.transpose(0, 1)
    steps, batch = input.shape[0], input.shape[1]
    if len(lengths) != batch:
        raise RuntimeError(
            f"Expected `len(lengths)` to be equal to batch_size, but got {len(lengths)} (batch_size={batch})"
        )
    if batch == 0 or lengths[-1] <= 0:
        raise RuntimeError(
            "Length of all samples has to be greater than 0, but found an element in 'lengths' that is <= 0"
        )
    if any(lengths[i] < lengths[i + 1] for i in range(batch - 1)):
        raise RuntimeError(
            "`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. You can pass "
            "`enforce_sorted=False` to pack_padded_sequence and/or pack_sequence to sidestep this requirement "
            "if you do not need ONNX exportability."
        )
    if lengths[0] > steps:
        raise RuntimeError(
            f"Expected all lengths to be at most the padded sequence length {steps}, but got {lengths[0]}"
        )
    batch_sizes = [sum(1 for n in lengths if n > t) for t in range(lengths[0])]
    rest = tuple(input.shape[2:])
    pieces, t = [], 0
    for b, count in _runs(batch_sizes):
        pieces.append(input[t : t + count, :b].reshape((count * b,) + rest))
        t += count
    data = pieces[0] if len(pieces) == 1 else ember.cat(pieces, 0)
    return data, ember.tensor(batch_sizes, dtype=ember.int64)


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):
    """Pack a padded batch of variable-length sequences.

    Args:
        input (Tensor): ``(T, B, *)``, or ``(B, T, *)`` if ``batch_first``; sequence ``b`` is
            ``input[:lengths[b], b]``.
        lengths (Tensor or list of int): the length of each sequence (a CPU int64 tensor or a list).
        batch_first (bool): layout of ``input``. Default ``False``.
        enforce_sorted (bool): if ``True``, ``lengths`` must be in decreasing order; if ``False`` the batch
            is sorted here and the permutation is kept in ``sorted_indices``. Default ``True``.

    Returns:
        PackedSequence: with ``data`` of shape ``(sum(lengths), *)``.

    Raises:
        RuntimeError: ``len(lengths)`` differs from the batch size, a length is ``<= 0`` or larger than
            ``T``, or ``lengths`` is not sorted while ``enforce_sorted=True``.
    """
    if isinstance(lengths, ember.Tensor):
        lengths = lengths.to(dtype=ember.int64)
    else:
        lengths = ember.as_tensor(list(lengths), dtype=ember.int64)
    if enforce_sorted:
        sorted_indices = None
    else:
        lengths, sorted_indices = ember.sort(lengths, descending=True)
        sorted_indices = sorted_indices.to(input.device)
        input = input.index_select(0 if batch_first else 1, sorted_indices)
    data, batch_sizes = _pack_padded(input, [int(n) for n in lengths.tolist()], batch_first)
    return PackedSequence(data, batch_sizes, sorted_indices, None)


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """Pad a :class:`PackedSequence` back into a tensor; the inverse of :func:`pack_padded_sequence`.

    Args:
        sequence (PackedSequence): the batch to pad.
        batch_first (bool): return ``(B, T, *)`` instead of ``(T, B, *)``. Default ``False``.
        padding_value (float): value of the padded elements. Default ``0.0``.
        total_length (int, optional): pad to this many steps instead of the longest length.

    Returns:
        tuple: ``(padded, lengths)``, with ``lengths`` an int64 CPU tensor in the original batch order.

    Raises:
        ValueError: ``total_length`` smaller than the longest sequence.
    """
    batch_sizes = [int(b) for b in sequence.batch_sizes.tolist()]
    max_seq_length = len(batch_sizes)
    if total_length is not None:
        if total_length < max_seq_length:
            raise ValueError(
                "Expected total_length to be at least the length "
                "of the longest sequence in input, but got "
                f"total_length={total_length} and max sequence length being {max_seq_length}"
            )
        max_seq_length = total_length
    data = sequence.data
    batch = batch_sizes[0]
    rest = tuple(data.shape[1:])
    factory = {"dtype": data.dtype, "device": data.device}
    pieces, offset = [], 0
    for b, count in _runs(batch_sizes):
        block = data[offset : offset + count * b].reshape((count, b) + rest)
        offset += count * b
        if b < batch:
            block = ember.cat([block, ember.full((count, batch - b) + rest, padding_value, **factory)], 1)
        pieces.append(block)
    if max_seq_length > len(batch_sizes):
        pieces.append(ember.full((max_seq_length - len(batch_sizes), batch) + rest, padding_value, **factory))
    padded = pieces[0] if len(pieces) == 1 else ember.cat(pieces, 0)
    lengths = ember.tensor([sum(1 for b in batch_sizes if b > i) for i in range(batch)], dtype=ember.int64)
    if batch_first:
        padded = padded.transpose(0, 1)
    if sequence.unsorted_indices is not None:
        padded = padded.index_select(0 if batch_first else 1, sequence.unsorted_indices)
        lengths = lengths.index_select(0, sequence.unsorted_indices.cpu())
    return padded, lengths


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """Stack a list of variable-length tensors ``(L_i, *)`` into one padded tensor.

    Args:
        sequences (list of Tensor): the sequences; trailing dimensions must agree.
        batch_first (bool): return ``(B, T, *)`` instead of ``(T, B, *)``. Default ``False``.
        padding_value (float): value of the padded elements. Default ``0.0``.
        padding_side (str): ``"right"`` (pad after each sequence) or ``"left"``. Default ``"right"``.

    Returns:
        Tensor: ``(T, B, *)`` or ``(B, T, *)`` with ``T = max(L_i)``.

    Raises:
        RuntimeError: ``sequences`` not iterable or empty, or a bad ``padding_side``.
    """
    if not isinstance(sequences, Iterable):
        raise RuntimeError(
            f"pad_sequence: Expected iterable for input sequences, but got arg of type: {type(sequences)}"
        )
    sequences = tuple(sequences)
    if padding_side not in ("left", "right"):
        raise RuntimeError(f"Expected padding_side to be one of left or right, but got {padding_side}.")
    if not sequences:
        raise RuntimeError("received an empty list of sequences")
    max_len = max(s.shape[0] for s in sequences)
    padded = []
    for s in sequences:
        n = s.shape[0]
        if n < max_len:
            pad = ember.full((max_len - n,) + tuple(s.shape[1:]), padding_value, dtype=s.dtype, device=s.device)
            s = ember.cat([s, pad] if padding_side == "right" else [pad, s], 0)
        padded.append(s)
    return ember.stack(padded, 0 if batch_first else 1)


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    """Split a padded tensor back into a list of variable-length tensors; the inverse of :func:`pad_sequence`.

    Args:
        padded_sequences (Tensor): ``(T, B, *)``, or ``(B, T, *)`` if ``batch_first``.
        lengths (Tensor or list of int): the length of each sequence.
        batch_first (bool): layout of ``padded_sequences``. Default ``False``.

    Returns:
        list of Tensor: ``B`` tensors of shapes ``(lengths[b], *)``.
    """
    if not batch_first:
        padded_sequences = padded_sequences.transpose(0, 1)
    if isinstance(lengths, ember.Tensor):
        lengths = lengths.tolist()
    return [padded_sequences[b, : int(n)] for b, n in enumerate(lengths)]


def pack_sequence(sequences, enforce_sorted=True):
    """Pack a list of variable-length tensors ``(L_i, *)``: ``pack_padded_sequence(pad_sequence(sequences), lengths)``.

    Args:
        sequences (list of Tensor): the sequences, in decreasing length if ``enforce_sorted``.
        enforce_sorted (bool): see :func:`pack_padded_sequence`. Default ``True``.

    Returns:
        PackedSequence
    """
    lengths = ember.as_tensor([v.shape[0] for v in sequences], dtype=ember.int64)
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences):
    """Unpack a :class:`PackedSequence` into the list of its tensors ``(L_i, *)``, in the original order."""
    padded_sequences, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded_sequences, lengths, batch_first=True)
