"""View ops: values against numpy, strides and offsets against PyTorch, shared storage.

Every case below is applied to four bases that view one 120-element storage
(contiguous, transposed, sliced, permuted). Values are compared with the same
operation in numpy; shapes, strides and storage offsets with what PyTorch gives
for the same calls (derived once from torch 2.x and hardcoded in EXPECTED).
"""

from __future__ import annotations

import numpy as np
import pytest

import ember

# -- the case table ---------------------------------------------------------------------------

def _split_np(a, size, dim):
    n = a.shape[dim]
    return np.split(a, list(range(size, n, size)), axis=dim)

def _chunk_np(a, chunks, dim):
    n = a.shape[dim]
    c = -(-n // chunks)
    return np.split(a, list(range(c, n, c)), axis=dim)

def _unfold_np(a, dim, size, step):
    w = np.lib.stride_tricks.sliding_window_view(a, size, axis=dim)
    idx = [slice(None)] * a.ndim
    idx[dim] = slice(None, None, step)
    return w[tuple(idx)]

# name: (op on a tensor, the same op in numpy, overlapping: the view has several elements at one address)
CASES = {
    "view_unsqueeze": (lambda x: x.view(1, *x.shape), lambda a: a.reshape(1, *a.shape), False),
    "transpose": (lambda x: x.transpose(0, -1), lambda a: np.swapaxes(a, 0, -1), False),
    "transpose_mid": (lambda x: x.transpose(1, 2), lambda a: np.swapaxes(a, 1, 2), False),
    "permute": (lambda x: x.permute(3, 1, 0, 2), lambda a: a.transpose(3, 1, 0, 2), False),
    "permute_neg": (lambda x: x.permute(-1, 0, -2, 1), lambda a: a.transpose(3, 0, 2, 1), False),
    "mT": (lambda x: x.mT, lambda a: np.swapaxes(a, -1, -2), False),
    "unsqueeze0": (lambda x: x.unsqueeze(0), lambda a: a[None], False),
    "unsqueeze2": (lambda x: x.unsqueeze(2), lambda a: np.expand_dims(a, 2), False),
    "unsqueeze_last": (lambda x: x.unsqueeze(-1), lambda a: a[..., None], False),
    "squeeze_all": (lambda x: x.unsqueeze(1).unsqueeze(0).squeeze(), lambda a: a, False),
    "squeeze_dim": (lambda x: x.unsqueeze(1).squeeze(1), lambda a: a, False),
    "squeeze_non1": (lambda x: x.squeeze(0), lambda a: a, False),
    "squeeze_tuple": (lambda x: x.unsqueeze(3).unsqueeze(0).squeeze((0, 4)), lambda a: a, False),
    "select": (lambda x: x.select(1, -1), lambda a: a[:, -1], False),
    "select_last": (lambda x: x.select(-1, 1), lambda a: a[..., 1], False),
    "narrow": (lambda x: x.narrow(-1, 1, 2), lambda a: a[..., 1:3], False),
    "narrow_neg_start": (lambda x: x.narrow(1, -1, 1), lambda a: a[:, -1:], False),
    "slice_step": (lambda x: x[:, ::2, 1:], lambda a: a[:, ::2, 1:], False),
    "expand": (lambda x: x.unsqueeze(0).expand(3, *x.shape), lambda a: np.broadcast_to(a[None], (3,) + a.shape), True),
    "expand_size1": (lambda x: x[:, :1].expand(-1, 4, -1, -1), lambda a: np.broadcast_to(a[:, :1], (a.shape[0], 4) + a.shape[2:]), True),
    "diagonal": (lambda x: x.diagonal(), lambda a: np.diagonal(a), False),
    "diagonal_offset": (lambda x: x.diagonal(1, 2, 3), lambda a: np.diagonal(a, 1, 2, 3), False),
    "diagonal_negative": (lambda x: x.diagonal(-1, -1, 1), lambda a: np.diagonal(a, -1, -1, 1), False),
    "unfold": (lambda x: x.unfold(-1, 2, 1), lambda a: _unfold_np(a, a.ndim - 1, 2, 1), True),
    "unfold_step": (lambda x: x.unfold(1, 1, 2), lambda a: _unfold_np(a, 1, 1, 2), False),
    "flatten_view": (lambda x: x.unsqueeze(-1).flatten(-2), lambda a: a, False),
    "detach": (lambda x: x.detach(), lambda a: a, False),
    "t_of_select": (lambda x: x[0, 0].t(), lambda a: a[0, 0].T, False),
    "T_of_select": (lambda x: x[1, :, 1].T, lambda a: a[1, :, 1].T, False),
    "as_strided": (lambda x: x.as_strided((2, 3), (1, 2), x.storage_offset() + 1), None, True),
    "getitem_basic": (lambda x: x[1, ..., None, ::2], lambda a: a[1, ..., None, ::2], False),
}

MULTI_CASES = {
    "split": (lambda x: x.split(2, dim=-1), lambda a: _split_np(a, 2, -1)),
    "split_sizes": (lambda x: x.split([1, x.shape[1] - 1], dim=1), lambda a: np.split(a, [1], axis=1)),
    "chunk": (lambda x: x.chunk(2, dim=2), lambda a: _chunk_np(a, 2, 2)),
    "chunk_uneven": (lambda x: x.chunk(3, dim=-1), lambda a: _chunk_np(a, 3, -1)),
    "unbind": (lambda x: x.unbind(1), lambda a: [a[:, i] for i in range(a.shape[1])]),
    "unbind_last": (lambda x: x.unbind(-1), lambda a: [a[..., i] for i in range(a.shape[-1])]),
}

def bases(arange):
    """Views of one 120-element storage, made by the same calls in ember and numpy."""
    a = arange(120.0).reshape(2, 3, 4, 5)
    return {
        "contiguous": a,
        "transposed": a.transpose(1, 3),
        "sliced": a[:, 1:, ::2],
        "permuted": a.permute(2, 0, 3, 1)[1:],
    }


# -- expected layouts, from PyTorch ----------------------------------------------------------------
# (shape, stride, storage_offset) of CASES[name] applied to bases()[base], as torch gives them.

EXPECTED = {
    ('view_unsqueeze', 'contiguous'): ((1, 2, 3, 4, 5), (120, 60, 20, 5, 1), 0),
    ('view_unsqueeze', 'transposed'): ((1, 2, 5, 4, 3), (120, 60, 1, 5, 20), 0),
    ('view_unsqueeze', 'sliced'): ((1, 2, 2, 2, 5), (120, 60, 20, 10, 1), 20),
    ('view_unsqueeze', 'permuted'): ((1, 3, 2, 5, 3), (15, 5, 60, 1, 20), 5),
    ('transpose', 'contiguous'): ((5, 3, 4, 2), (1, 20, 5, 60), 0),
    ('transpose', 'transposed'): ((3, 5, 4, 2), (20, 1, 5, 60), 0),
    ('transpose', 'sliced'): ((5, 2, 2, 2), (1, 20, 10, 60), 20),
    ('transpose', 'permuted'): ((3, 2, 5, 3), (20, 60, 1, 5), 5),
    ('transpose_mid', 'contiguous'): ((2, 4, 3, 5), (60, 5, 20, 1), 0),
    ('transpose_mid', 'transposed'): ((2, 4, 5, 3), (60, 5, 1, 20), 0),
    ('transpose_mid', 'sliced'): ((2, 2, 2, 5), (60, 10, 20, 1), 20),
    ('transpose_mid', 'permuted'): ((3, 5, 2, 3), (5, 1, 60, 20), 5),
    ('permute', 'contiguous'): ((5, 3, 2, 4), (1, 20, 60, 5), 0),
    ('permute', 'transposed'): ((3, 5, 2, 4), (20, 1, 60, 5), 0),
    ('permute', 'sliced'): ((5, 2, 2, 2), (1, 20, 60, 10), 20),
    ('permute', 'permuted'): ((3, 2, 3, 5), (20, 60, 5, 1), 5),
    ('permute_neg', 'contiguous'): ((5, 2, 4, 3), (1, 60, 5, 20), 0),
    ('permute_neg', 'transposed'): ((3, 2, 4, 5), (20, 60, 5, 1), 0),
    ('permute_neg', 'sliced'): ((5, 2, 2, 2), (1, 60, 10, 20), 20),
    ('permute_neg', 'permuted'): ((3, 3, 5, 2), (20, 5, 1, 60), 5),
    ('mT', 'contiguous'): ((2, 3, 5, 4), (60, 20, 1, 5), 0),
    ('mT', 'transposed'): ((2, 5, 3, 4), (60, 1, 20, 5), 0),
    ('mT', 'sliced'): ((2, 2, 5, 2), (60, 20, 1, 10), 20),
    ('mT', 'permuted'): ((3, 2, 3, 5), (5, 60, 20, 1), 5),
    ('unsqueeze0', 'contiguous'): ((1, 2, 3, 4, 5), (120, 60, 20, 5, 1), 0),
    ('unsqueeze0', 'transposed'): ((1, 2, 5, 4, 3), (120, 60, 1, 5, 20), 0),
    ('unsqueeze0', 'sliced'): ((1, 2, 2, 2, 5), (120, 60, 20, 10, 1), 20),
    ('unsqueeze0', 'permuted'): ((1, 3, 2, 5, 3), (15, 5, 60, 1, 20), 5),
    ('unsqueeze2', 'contiguous'): ((2, 3, 1, 4, 5), (60, 20, 20, 5, 1), 0),
    ('unsqueeze2', 'transposed'): ((2, 5, 1, 4, 3), (60, 1, 20, 5, 20), 0),
    ('unsqueeze2', 'sliced'): ((2, 2, 1, 2, 5), (60, 20, 20, 10, 1), 20),
    ('unsqueeze2', 'permuted'): ((3, 2, 1, 5, 3), (5, 60, 5, 1, 20), 5),
    ('unsqueeze_last', 'contiguous'): ((2, 3, 4, 5, 1), (60, 20, 5, 1, 1), 0),
    ('unsqueeze_last', 'transposed'): ((2, 5, 4, 3, 1), (60, 1, 5, 20, 1), 0),
    ('unsqueeze_last', 'sliced'): ((2, 2, 2, 5, 1), (60, 20, 10, 1, 1), 20),
    ('unsqueeze_last', 'permuted'): ((3, 2, 5, 3, 1), (5, 60, 1, 20, 1), 5),
    ('squeeze_all', 'contiguous'): ((2, 3, 4, 5), (60, 20, 5, 1), 0),
    ('squeeze_all', 'transposed'): ((2, 5, 4, 3), (60, 1, 5, 20), 0),
    ('squeeze_all', 'sliced'): ((2, 2, 2, 5), (60, 20, 10, 1), 20),
    ('squeeze_all', 'permuted'): ((3, 2, 5, 3), (5, 60, 1, 20), 5),
    ('squeeze_dim', 'contiguous'): ((2, 3, 4, 5), (60, 20, 5, 1), 0),
    ('squeeze_dim', 'transposed'): ((2, 5, 4, 3), (60, 1, 5, 20), 0),
    ('squeeze_dim', 'sliced'): ((2, 2, 2, 5), (60, 20, 10, 1), 20),
    ('squeeze_dim', 'permuted'): ((3, 2, 5, 3), (5, 60, 1, 20), 5),
    ('squeeze_non1', 'contiguous'): ((2, 3, 4, 5), (60, 20, 5, 1), 0),
    ('squeeze_non1', 'transposed'): ((2, 5, 4, 3), (60, 1, 5, 20), 0),
    ('squeeze_non1', 'sliced'): ((2, 2, 2, 5), (60, 20, 10, 1), 20),
    ('squeeze_non1', 'permuted'): ((3, 2, 5, 3), (5, 60, 1, 20), 5),
    ('squeeze_tuple', 'contiguous'): ((2, 3, 4, 5), (60, 20, 5, 1), 0),
    ('squeeze_tuple', 'transposed'): ((2, 5, 4, 3), (60, 1, 5, 20), 0),
    ('squeeze_tuple', 'sliced'): ((2, 2, 2, 5), (60, 20, 10, 1), 20),
    ('squeeze_tuple', 'permuted'): ((3, 2, 5, 3), (5, 60, 1, 20), 5),
    ('select', 'contiguous'): ((2, 4, 5), (60, 5, 1), 40),
    ('select', 'transposed'): ((2, 4, 3), (60, 5, 20), 4),
    ('select', 'sliced'): ((2, 2, 5), (60, 10, 1), 40),
    ('select', 'permuted'): ((3, 5, 3), (5, 1, 20), 65),
    ('select_last', 'contiguous'): ((2, 3, 4), (60, 20, 5), 1),
    ('select_last', 'transposed'): ((2, 5, 4), (60, 1, 5), 20),
    ('select_last', 'sliced'): ((2, 2, 2), (60, 20, 10), 21),
    ('select_last', 'permuted'): ((3, 2, 5), (5, 60, 1), 25),
    ('narrow', 'contiguous'): ((2, 3, 4, 2), (60, 20, 5, 1), 1),
    ('narrow', 'transposed'): ((2, 5, 4, 2), (60, 1, 5, 20), 20),
    ('narrow', 'sliced'): ((2, 2, 2, 2), (60, 20, 10, 1), 21),
    ('narrow', 'permuted'): ((3, 2, 5, 2), (5, 60, 1, 20), 25),
    ('narrow_neg_start', 'contiguous'): ((2, 1, 4, 5), (60, 20, 5, 1), 40),
    ('narrow_neg_start', 'transposed'): ((2, 1, 4, 3), (60, 1, 5, 20), 4),
    ('narrow_neg_start', 'sliced'): ((2, 1, 2, 5), (60, 20, 10, 1), 40),
    ('narrow_neg_start', 'permuted'): ((3, 1, 5, 3), (5, 60, 1, 20), 65),
    ('slice_step', 'contiguous'): ((2, 2, 3, 5), (60, 40, 5, 1), 5),
    ('slice_step', 'transposed'): ((2, 3, 3, 3), (60, 2, 5, 20), 5),
    ('slice_step', 'sliced'): ((2, 1, 1, 5), (60, 40, 10, 1), 30),
    ('slice_step', 'permuted'): ((3, 1, 4, 3), (5, 120, 1, 20), 6),
    ('expand', 'contiguous'): ((3, 2, 3, 4, 5), (0, 60, 20, 5, 1), 0),
    ('expand', 'transposed'): ((3, 2, 5, 4, 3), (0, 60, 1, 5, 20), 0),
    ('expand', 'sliced'): ((3, 2, 2, 2, 5), (0, 60, 20, 10, 1), 20),
    ('expand', 'permuted'): ((3, 3, 2, 5, 3), (0, 5, 60, 1, 20), 5),
    ('expand_size1', 'contiguous'): ((2, 4, 4, 5), (60, 0, 5, 1), 0),
    ('expand_size1', 'transposed'): ((2, 4, 4, 3), (60, 0, 5, 20), 0),
    ('expand_size1', 'sliced'): ((2, 4, 2, 5), (60, 0, 10, 1), 20),
    ('expand_size1', 'permuted'): ((3, 4, 5, 3), (5, 0, 1, 20), 5),
    ('diagonal', 'contiguous'): ((4, 5, 2), (5, 1, 80), 0),
    ('diagonal', 'transposed'): ((4, 3, 2), (5, 20, 61), 0),
    ('diagonal', 'sliced'): ((2, 5, 2), (10, 1, 80), 20),
    ('diagonal', 'permuted'): ((5, 3, 2), (1, 20, 65), 5),
    ('diagonal_offset', 'contiguous'): ((2, 3, 4), (60, 20, 6), 1),
    ('diagonal_offset', 'transposed'): ((2, 5, 2), (60, 1, 25), 20),
    ('diagonal_offset', 'sliced'): ((2, 2, 2), (60, 20, 11), 21),
    ('diagonal_offset', 'permuted'): ((3, 2, 2), (5, 60, 21), 25),
    ('diagonal_negative', 'contiguous'): ((2, 4, 3), (60, 5, 21), 1),
    ('diagonal_negative', 'transposed'): ((2, 4, 2), (60, 5, 21), 20),
    ('diagonal_negative', 'sliced'): ((2, 2, 2), (60, 10, 21), 21),
    ('diagonal_negative', 'permuted'): ((3, 5, 2), (5, 1, 80), 25),
    ('unfold', 'contiguous'): ((2, 3, 4, 4, 2), (60, 20, 5, 1, 1), 0),
    ('unfold', 'transposed'): ((2, 5, 4, 2, 2), (60, 1, 5, 20, 20), 0),
    ('unfold', 'sliced'): ((2, 2, 2, 4, 2), (60, 20, 10, 1, 1), 20),
    ('unfold', 'permuted'): ((3, 2, 5, 2, 2), (5, 60, 1, 20, 20), 5),
    ('unfold_step', 'contiguous'): ((2, 2, 4, 5, 1), (60, 40, 5, 1, 20), 0),
    ('unfold_step', 'transposed'): ((2, 3, 4, 3, 1), (60, 2, 5, 20, 1), 0),
    ('unfold_step', 'sliced'): ((2, 1, 2, 5, 1), (60, 40, 10, 1, 20), 20),
    ('unfold_step', 'permuted'): ((3, 1, 5, 3, 1), (5, 120, 1, 20, 60), 5),
    ('flatten_view', 'contiguous'): ((2, 3, 4, 5), (60, 20, 5, 1), 0),
    ('flatten_view', 'transposed'): ((2, 5, 4, 3), (60, 1, 5, 20), 0),
    ('flatten_view', 'sliced'): ((2, 2, 2, 5), (60, 20, 10, 1), 20),
    ('flatten_view', 'permuted'): ((3, 2, 5, 3), (5, 60, 1, 20), 5),
    ('detach', 'contiguous'): ((2, 3, 4, 5), (60, 20, 5, 1), 0),
    ('detach', 'transposed'): ((2, 5, 4, 3), (60, 1, 5, 20), 0),
    ('detach', 'sliced'): ((2, 2, 2, 5), (60, 20, 10, 1), 20),
    ('detach', 'permuted'): ((3, 2, 5, 3), (5, 60, 1, 20), 5),
    ('t_of_select', 'contiguous'): ((5, 4), (1, 5), 0),
    ('t_of_select', 'transposed'): ((3, 4), (20, 5), 0),
    ('t_of_select', 'sliced'): ((5, 2), (1, 10), 20),
    ('t_of_select', 'permuted'): ((3, 5), (20, 1), 5),
    ('T_of_select', 'contiguous'): ((5, 3), (1, 20), 65),
    ('T_of_select', 'transposed'): ((3, 5), (20, 1), 65),
    ('T_of_select', 'sliced'): ((5, 2), (1, 20), 90),
    ('T_of_select', 'permuted'): ((3, 2), (20, 60), 11),
    ('as_strided', 'contiguous'): ((2, 3), (1, 2), 1),
    ('as_strided', 'transposed'): ((2, 3), (1, 2), 1),
    ('as_strided', 'sliced'): ((2, 3), (1, 2), 21),
    ('as_strided', 'permuted'): ((2, 3), (1, 2), 6),
    ('getitem_basic', 'contiguous'): ((3, 4, 1, 3), (20, 5, 5, 2), 60),
    ('getitem_basic', 'transposed'): ((5, 4, 1, 2), (1, 5, 60, 40), 60),
    ('getitem_basic', 'sliced'): ((2, 2, 1, 3), (20, 10, 5, 2), 80),
    ('getitem_basic', 'permuted'): ((2, 5, 1, 2), (60, 1, 60, 40), 10),
}

EXPECTED_MULTI = {
    ('split', 'contiguous'): [((2, 3, 4, 2), (60, 20, 5, 1), 0), ((2, 3, 4, 2), (60, 20, 5, 1), 2), ((2, 3, 4, 1), (60, 20, 5, 1), 4)],
    ('split', 'transposed'): [((2, 5, 4, 2), (60, 1, 5, 20), 0), ((2, 5, 4, 1), (60, 1, 5, 20), 40)],
    ('split', 'sliced'): [((2, 2, 2, 2), (60, 20, 10, 1), 20), ((2, 2, 2, 2), (60, 20, 10, 1), 22), ((2, 2, 2, 1), (60, 20, 10, 1), 24)],
    ('split', 'permuted'): [((3, 2, 5, 2), (5, 60, 1, 20), 5), ((3, 2, 5, 1), (5, 60, 1, 20), 45)],
    ('split_sizes', 'contiguous'): [((2, 1, 4, 5), (60, 20, 5, 1), 0), ((2, 2, 4, 5), (60, 20, 5, 1), 20)],
    ('split_sizes', 'transposed'): [((2, 1, 4, 3), (60, 1, 5, 20), 0), ((2, 4, 4, 3), (60, 1, 5, 20), 1)],
    ('split_sizes', 'sliced'): [((2, 1, 2, 5), (60, 20, 10, 1), 20), ((2, 1, 2, 5), (60, 20, 10, 1), 40)],
    ('split_sizes', 'permuted'): [((3, 1, 5, 3), (5, 60, 1, 20), 5), ((3, 1, 5, 3), (5, 60, 1, 20), 65)],
    ('chunk', 'contiguous'): [((2, 3, 2, 5), (60, 20, 5, 1), 0), ((2, 3, 2, 5), (60, 20, 5, 1), 10)],
    ('chunk', 'transposed'): [((2, 5, 2, 3), (60, 1, 5, 20), 0), ((2, 5, 2, 3), (60, 1, 5, 20), 10)],
    ('chunk', 'sliced'): [((2, 2, 1, 5), (60, 20, 10, 1), 20), ((2, 2, 1, 5), (60, 20, 10, 1), 30)],
    ('chunk', 'permuted'): [((3, 2, 3, 3), (5, 60, 1, 20), 5), ((3, 2, 2, 3), (5, 60, 1, 20), 8)],
    ('chunk_uneven', 'contiguous'): [((2, 3, 4, 2), (60, 20, 5, 1), 0), ((2, 3, 4, 2), (60, 20, 5, 1), 2), ((2, 3, 4, 1), (60, 20, 5, 1), 4)],
    ('chunk_uneven', 'transposed'): [((2, 5, 4, 1), (60, 1, 5, 20), 0), ((2, 5, 4, 1), (60, 1, 5, 20), 20), ((2, 5, 4, 1), (60, 1, 5, 20), 40)],
    ('chunk_uneven', 'sliced'): [((2, 2, 2, 2), (60, 20, 10, 1), 20), ((2, 2, 2, 2), (60, 20, 10, 1), 22), ((2, 2, 2, 1), (60, 20, 10, 1), 24)],
    ('chunk_uneven', 'permuted'): [((3, 2, 5, 1), (5, 60, 1, 20), 5), ((3, 2, 5, 1), (5, 60, 1, 20), 25), ((3, 2, 5, 1), (5, 60, 1, 20), 45)],
    ('unbind', 'contiguous'): [((2, 4, 5), (60, 5, 1), 0), ((2, 4, 5), (60, 5, 1), 20), ((2, 4, 5), (60, 5, 1), 40)],
    ('unbind', 'transposed'): [((2, 4, 3), (60, 5, 20), 0), ((2, 4, 3), (60, 5, 20), 1), ((2, 4, 3), (60, 5, 20), 2), ((2, 4, 3), (60, 5, 20), 3), ((2, 4, 3), (60, 5, 20), 4)],
    ('unbind', 'sliced'): [((2, 2, 5), (60, 10, 1), 20), ((2, 2, 5), (60, 10, 1), 40)],
    ('unbind', 'permuted'): [((3, 5, 3), (5, 1, 20), 5), ((3, 5, 3), (5, 1, 20), 65)],
    ('unbind_last', 'contiguous'): [((2, 3, 4), (60, 20, 5), 0), ((2, 3, 4), (60, 20, 5), 1), ((2, 3, 4), (60, 20, 5), 2), ((2, 3, 4), (60, 20, 5), 3), ((2, 3, 4), (60, 20, 5), 4)],
    ('unbind_last', 'transposed'): [((2, 5, 4), (60, 1, 5), 0), ((2, 5, 4), (60, 1, 5), 20), ((2, 5, 4), (60, 1, 5), 40)],
    ('unbind_last', 'sliced'): [((2, 2, 2), (60, 20, 10), 20), ((2, 2, 2), (60, 20, 10), 21), ((2, 2, 2), (60, 20, 10), 22), ((2, 2, 2), (60, 20, 10), 23), ((2, 2, 2), (60, 20, 10), 24)],
    ('unbind_last', 'permuted'): [((3, 2, 5), (5, 60, 1), 5), ((3, 2, 5), (5, 60, 1), 25), ((3, 2, 5), (5, 60, 1), 45)],
}


BASE_NAMES = ["contiguous", "transposed", "sliced", "permuted"]


def _numpy_arange(n):
    return np.arange(n)


def _setup(base_name):
    """(root tensor, ember base view, numpy base view, numpy storage-position view) for ``base_name``."""
    storage = np.arange(120.0)
    root = ember.from_numpy(storage.copy())
    base = bases(lambda n: root)[base_name] if False else _ember_base(root, base_name)
    np_base = bases(lambda n: storage)[base_name] if False else _numpy_base(storage, base_name)
    positions = _numpy_base(np.arange(120), base_name)
    return root, base, np_base, positions


def _ember_base(root, name):
    return {
        "contiguous": lambda a: a,
        "transposed": lambda a: a.transpose(1, 3),
        "sliced": lambda a: a[:, 1:, ::2],
        "permuted": lambda a: a.permute(2, 0, 3, 1)[1:],
    }[name](root.view(2, 3, 4, 5))


def _numpy_base(array, name):
    a = array.reshape(2, 3, 4, 5)
    return {
        "contiguous": lambda a: a,
        "transposed": lambda a: a.swapaxes(1, 3),
        "sliced": lambda a: a[:, 1:, ::2],
        "permuted": lambda a: a.transpose(2, 0, 3, 1)[1:],
    }[name](a)


def _as_strided_np(positions, base, view):
    """The numpy counterpart of an as_strided view: its storage positions."""
    return np.lib.stride_tricks.as_strided(
        np.arange(120), view.shape, tuple(s * 8 for s in view.stride()), writeable=False
    )[...] + view.storage_offset() if False else _positions_of(view)


def _positions_of(view):
    """Storage positions of every element of ``view`` (from its own metadata)."""
    idx = np.full(view.shape, view.storage_offset(), dtype=np.int64)
    for d, (n, s) in enumerate(zip(view.shape, view.stride())):
        shape = [1] * view.ndim
        shape[d] = n
        idx = idx + (np.arange(n) * s).reshape(shape)
    return idx


def test_bases_match_numpy():
    for name in BASE_NAMES:
        root, base, np_base, positions = _setup(name)
        np.testing.assert_array_equal(base.numpy(), np_base)
        np.testing.assert_array_equal(_positions_of(base), positions)


@pytest.mark.parametrize("base_name", BASE_NAMES)
@pytest.mark.parametrize("case", list(CASES))
def test_view_values_and_layout(case, base_name):
    fn, np_fn, _ = CASES[case]
    root, base, np_base, positions = _setup(base_name)
    view = fn(base)
    shape, stride, offset = EXPECTED[case, base_name]
    assert tuple(view.shape) == shape
    assert view.stride() == stride
    assert view.storage_offset() == offset
    # the view reads the storage where its metadata says
    np.testing.assert_array_equal(view.numpy(), root.numpy()[_positions_of(view)])
    if np_fn is not None:
        np.testing.assert_array_equal(view.numpy(), np_fn(np_base))
        np.testing.assert_array_equal(_positions_of(view), np_fn(positions))
    # a view: same storage, same root, no copy
    assert view.untyped_storage() is root.untyped_storage()
    assert view._base is root
    assert view.data_ptr() == root.data_ptr() + offset * root.element_size()
    assert view.dtype is ember.float64 and view.device == root.device


@pytest.mark.parametrize("base_name", BASE_NAMES)
@pytest.mark.parametrize("case", list(MULTI_CASES))
def test_multi_output_views(case, base_name):
    fn, np_fn = MULTI_CASES[case]
    root, base, np_base, positions = _setup(base_name)
    pieces = fn(base)
    assert isinstance(pieces, tuple)
    expected = EXPECTED_MULTI[case, base_name]
    refs = np_fn(np_base)
    assert len(pieces) == len(expected) == len(refs)
    for piece, (shape, stride, offset), ref in zip(pieces, expected, refs):
        assert (tuple(piece.shape), piece.stride(), piece.storage_offset()) == (shape, stride, offset)
        np.testing.assert_array_equal(piece.numpy(), ref)
        assert piece.untyped_storage() is root.untyped_storage()
        assert piece._base is root


@pytest.mark.parametrize("base_name", BASE_NAMES)
@pytest.mark.parametrize("case", [c for c, (_, _, overlapping) in CASES.items() if not overlapping])
def test_writes_through_views_reach_the_base(case, base_name):
    fn = CASES[case][0]
    root, base, np_base, positions = _setup(base_name)
    view = fn(base)
    touched = np.unique(_positions_of(view))
    expected = np.arange(120.0)
    expected[touched] += 1000.0
    view.add_(1000.0)
    np.testing.assert_array_equal(root.numpy(), expected)
    np.testing.assert_array_equal(base.numpy(), _numpy_base(expected, base_name))
    # one version counter per storage: the root, the base and the view all moved
    assert view._version == base._version == root._version == 1


@pytest.mark.parametrize("base_name", BASE_NAMES)
@pytest.mark.parametrize("case", list(CASES))
def test_writes_to_the_base_show_in_views(case, base_name):
    fn = CASES[case][0]
    root, base, np_base, positions = _setup(base_name)
    view = fn(base)
    root.mul_(-1.0)
    np.testing.assert_array_equal(view.numpy(), -np.arange(120.0)[_positions_of(view)])
    assert view._version == 1
    base.zero_()
    assert view._version == 2
    touched = np.zeros(120, bool)
    touched[_positions_of(base).ravel()] = True
    np.testing.assert_array_equal(root.numpy()[touched], 0.0)
    np.testing.assert_array_equal(root.numpy()[~touched], -np.arange(120.0)[~touched])
