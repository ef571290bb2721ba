"""Tensors to numpy arrays, image layouts and histogram buckets for the summary writer (numpy only)."""

import numbers

import numpy as np


def to_numpy(value, *, argument="value"):
    """``value`` (an ember or torch tensor, numpy array or Python number) as a numpy array.

    Tensors go through ``.detach().cpu().numpy()``, so tensors that require grad or live on a GPU
    work; low-precision floats (bfloat16, float16) become float32, which numpy and PIL handle.

    Raises:
        TypeError: ``value`` is not a tensor, array or number (message names ``argument``).
    """
    if hasattr(value, "detach") and hasattr(value, "cpu"):
        value = value.detach().cpu().numpy()
    elif isinstance(value, (numbers.Number, np.generic, list, tuple)):
        value = np.asarray(value)
    elif not isinstance(value, np.ndarray):
        raise TypeError(f"{argument} must be a tensor, a numpy array or a number, got {type(value).__name__}")
    if value.dtype.kind == "V" or (value.dtype.kind == "f" and value.dtype.itemsize < 4):
        value = value.astype(np.float32)  # ml_dtypes' bfloat16 and float16
    return value


def to_scalar(value, *, argument="scalar_value"):
    """A one-element tensor, array or number as a Python float."""
    array = to_numpy(value, argument=argument)
    if array.size != 1:
        raise ValueError(f"{argument} must have exactly one element, got shape {tuple(array.shape)}")
    return float(array.reshape(()))


def _check_dataformats(array, dataformats, allowed_letters):
    letters = dataformats.upper()
    if len(set(letters)) != len(letters) or set(letters) - set(allowed_letters):
        raise ValueError(f"dataformats must name each of {allowed_letters!r} at most once, got {dataformats!r}")
    if array.ndim != len(letters):
        raise ValueError(
            f"dataformats {dataformats!r} has {len(letters)} dimensions but the image has shape {tuple(array.shape)}"
        )
    return letters


def _three_channels(hwc):
    # TensorBoard shows gray images as RGB: repeat the single channel.
    return np.repeat(hwc, 3, axis=2) if hwc.shape[2] == 1 else hwc


def tile(nchw, columns=8):
    """Images ``(N, C, H, W)`` (C = 1 or 3) laid out on a grid ``(3, rows*H, min(N, columns)*W)``, row by row."""
    if nchw.shape[1] == 1:
        nchw = np.repeat(nchw, 3, axis=1)
    if nchw.shape[1] != 3:
        raise ValueError(f"add_images needs 1 or 3 channels per image, got {nchw.shape[1]}")
    count, _, height, width = nchw.shape
    columns = min(count, columns)
    rows = -(-count // columns)
    grid = np.zeros((3, rows * height, columns * width), dtype=nchw.dtype)
    for index in range(count):
        row, column = divmod(index, columns)
        grid[:, row * height : (row + 1) * height, column * width : (column + 1) * width] = nchw[index]
    return grid


def to_hwc(array, dataformats):
    """An image array in layout ``dataformats`` (``"CHW"``, ``"HWC"``, ``"HW"``, or ``"NCHW"``/``"NHWC"``
    for a batch, tiled on a grid of 8 columns) as ``(H, W, C)`` with 3 or 4 channels."""
    if len(dataformats) == 4:
        letters = _check_dataformats(array, dataformats, "NCHW")
        nchw = array.transpose([letters.index(c) for c in "NCHW"])
        return tile(nchw).transpose(1, 2, 0)
    if len(dataformats) == 3:
        letters = _check_dataformats(array, dataformats, "CHW")
        return _three_channels(array.transpose([letters.index(c) for c in "HWC"]))
    if len(dataformats) == 2:
        letters = _check_dataformats(array, dataformats, "HW")
        return _three_channels(array.transpose([letters.index(c) for c in "HW"])[:, :, None])
    raise ValueError(f"dataformats must have 2, 3 or 4 letters (e.g. 'CHW', 'HWC', 'NCHW'), got {dataformats!r}")


def to_uint8(hwc):
    """Pixel values as uint8: uint8 images are taken as 0..255, any other dtype as 0..1 (scaled by 255);
    values out of range are clipped."""
    scale = 1.0 if hwc.dtype == np.uint8 else 255.0
    return np.clip(hwc.astype(np.float32) * scale, 0, 255).astype(np.uint8)


def tensorflow_bucket_edges():
    """TensorBoard's default histogram bucket edges: +-1e-12 growing by 10% up to 1e20, and 0."""
    # Repeated multiplication (not 1.1 ** k), so the edges are bit for bit those TensorBoard's other
    # writers use and histograms of the same values compare equal.
    positive = []
    edge = 1e-12
    while edge < 1e20:
        positive.append(edge)
        edge *= 1.1
    positive = np.array(positive)
    return np.concatenate([-positive[::-1], [0.0], positive])


def histogram(values, bins, max_bins=None):
    """The fields of a TensorBoard histogram of ``values`` (flattened, as float64).

    ``bins`` is anything :func:`numpy.histogram` takes. With ``max_bins``, neighbouring buckets are
    merged until at most that many are left. Empty buckets at either end are dropped, except one
    before the first filled bucket: TensorBoard stores only right edges, and that bucket records
    the left edge of the data.

    Returns:
        dict with ``min``, ``max``, ``num``, ``sum``, ``sum_squares``, ``bucket_limit``, ``bucket``.

    Raises:
        ValueError: ``values`` is empty, or no value falls inside ``bins``.
    """
    values = values.reshape(-1).astype(np.float64)
    if values.size == 0:
        raise ValueError("add_histogram: values has no element")
    counts, edges = np.histogram(values, bins=bins)
    if max_bins is not None and len(counts) > max_bins:
        group = len(counts) // max_bins
        counts = np.pad(counts, (0, -len(counts) % group)).reshape(-1, group).sum(axis=1)
        edges = np.concatenate([edges[:-1:group], edges[-1:]])
    filled = np.flatnonzero(counts)
    if filled.size == 0:
        raise ValueError("add_histogram: no value falls inside the histogram's bins")
    first, last = int(filled[0]), int(filled[-1])
    if first > 0:
        counts, limits = counts[first - 1 : last + 1], edges[first : last + 2]
    else:
        counts, limits = np.concatenate([[0], counts[: last + 1]]), edges[: last + 2]
    return {
        "min": float(values.min()),
        "max": float(values.max()),
        "num": int(values.size),
        "sum": float(values.sum()),
        "sum_squares": float(values.dot(values)),
        "bucket_limit": limits.tolist(),
        "bucket": counts.tolist(),
    }
