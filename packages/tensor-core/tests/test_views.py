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


def _setup(base_name):
    """(root tensor, ember base view, numpy base view, numpy storage-position view) for ``base_name``."""
    storage = np.arange(120.0)
    root = ember.from_numpy(storage.copy())
    base = _ember_base(root, base_name)
    np_base = _numpy_base(storage, base_name)
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


# -- view and reshape ---------------------------------------------------------------------------------


def test_view_infers_minus_one():
    x = ember.arange(12.0)
    v = x.view(3, -1)
    assert v.shape == (3, 4) and v.stride() == (4, 1)
    np.testing.assert_array_equal(v.numpy(), np.arange(12.0).reshape(3, 4))
    assert x.view(-1, 2, 3).shape == (2, 2, 3)
    assert x.view((2, 6)).shape == (2, 6)
    assert x.view(ember.Size([4, 3])).shape == (4, 3)
    assert ember.tensor(5.0).view(1, 1).stride() == (1, 1)
    assert ember.tensor([5.0]).view(()).shape == ()
    assert ember.zeros(0, 3).view(3, 0, 5).shape == (3, 0, 5)


def test_view_errors():
    x = ember.arange(12.0).view(3, 4)
    with pytest.raises(RuntimeError, match="invalid for input of size 12"):
        x.view(5, -1)
    with pytest.raises(RuntimeError, match="only one dimension can be inferred"):
        x.view(-1, -1)
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        x.t().view(12)
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        ember.zeros(3, 1).expand(3, 4).view(12)
    # a non-contiguous tensor can still be viewed when the merged dims are compatible
    y = ember.arange(24.0).view(2, 3, 4).transpose(0, 1)  # (3, 2, 4), strides (4, 12, 1)
    z = y.view(3, 2, 2, 2)
    assert z.stride() == (4, 12, 2, 1)
    np.testing.assert_array_equal(z.numpy(), np.arange(24.0).reshape(2, 3, 4).swapaxes(0, 1).reshape(3, 2, 2, 2))


def test_reshape_is_a_view_when_possible_and_a_copy_otherwise():
    x = ember.zeros(3, 4).copy_(ember.arange(12.0).view(3, 4))
    assert x._base is None
    r = x.reshape(2, 6)
    assert r._base is x and r.data_ptr() == x.data_ptr()
    t = x.t().reshape(12)  # needs a copy
    assert t.untyped_storage() is not x.untyped_storage() and t.data_ptr() != x.data_ptr()
    assert t.is_contiguous() and t.stride() == (1,)
    np.testing.assert_array_equal(t.numpy(), np.arange(12.0).reshape(3, 4).T.reshape(12))
    t[0] = 100.0
    assert x[0, 0].item() == 0.0  # the copy is independent
    s = x[:, ::2].reshape(6)  # strides (4, 2) merge: still a view
    assert s.stride() == (2,) and s._base is x
    np.testing.assert_array_equal(s.numpy(), np.arange(12.0).reshape(3, 4)[:, ::2].reshape(6))
    f = x.t().flatten()
    assert f.is_contiguous() and f.untyped_storage() is not x.untyped_storage()
    np.testing.assert_array_equal(f.numpy(), np.arange(12.0).reshape(3, 4).T.ravel())
    assert x.flatten()._base is x
    assert ember.tensor(3.0).flatten().shape == (1,)
    with pytest.raises(RuntimeError):
        x.reshape(5, 3)
    with pytest.raises(RuntimeError):
        x.flatten(1, 0)


def test_contiguous_copies_non_contiguous_tensors():
    x = ember.arange(6.0).view(2, 3)
    assert x.contiguous() is x
    c = x.t().contiguous()
    assert c.is_contiguous() and c.stride() == (2, 1)
    np.testing.assert_array_equal(c.numpy(), np.arange(6.0).reshape(2, 3).T)


def test_clone_keeps_dense_layouts():
    # strides derived from PyTorch (clone's default memory_format is preserve_format)
    from ember._ops.creation import contiguous_format

    x = ember.arange(24.0).view(2, 3, 4)
    for view, stride in [
        (x, (12, 4, 1)),
        (x.transpose(0, 2), (1, 4, 12)),
        (x.transpose(0, 2)[::2], (1, 2, 6)),
        (x[:, :, ::2], (6, 2, 1)),
        (x.permute(1, 0, 2)[:, :, 1:], (3, 9, 1)),
        (x[:, :1].expand(2, 3, 4), (12, 4, 1)),
        (x.mT[..., ::2], (8, 1, 4)),
    ]:
        c = view.clone()
        assert c.stride() == stride
        assert c.untyped_storage() is not x.untyped_storage()
        np.testing.assert_array_equal(c.numpy(), view.numpy())
        assert view.clone(memory_format=contiguous_format).is_contiguous()
        assert view.to(ember.float64).stride() == stride  # conversions keep it too


# -- as_strided -----------------------------------------------------------------------------------------


def test_as_strided():
    x = ember.arange(12.0)
    v = x.as_strided((2, 2), (4, 1), 1)
    assert (v.shape, v.stride(), v.storage_offset()) == ((2, 2), (4, 1), 1)
    assert v.tolist() == [[1.0, 2.0], [5.0, 6.0]]
    # the offset is absolute in the storage, and defaults to the input's
    w = x[4:].as_strided((2,), (3,))
    assert (w.storage_offset(), w.tolist()) == (4, [4.0, 7.0])
    z = x.as_strided((3,), (0,), 11)
    assert z.tolist() == [11.0, 11.0, 11.0]
    v[1, 1] = -6.0
    assert x[6].item() == -6.0
    assert v._version == x._version == 1


@pytest.mark.parametrize(
    ("size", "stride", "offset"),
    [((3, 3), (4, 1), 4), ((12,), (1,), 1), ((13,), (1,), 0)],
)
def test_as_strided_out_of_bounds(size, stride, offset):
    x = ember.arange(12.0)
    with pytest.raises(RuntimeError, match="out of bounds for storage"):
        x.as_strided(size, stride, offset)


def test_as_strided_bad_arguments():
    x = ember.arange(12.0)
    with pytest.raises(RuntimeError, match="mismatch in length"):
        x.as_strided((2,), (1, 1))
    with pytest.raises(RuntimeError, match="Negative strides"):
        x.as_strided((2,), (-1,))


# -- permutations, size-1 dims, expand --------------------------------------------------------------------


def test_transpose_permute_t():
    x = ember.arange(24.0).view(2, 3, 4)
    a = np.arange(24.0).reshape(2, 3, 4)
    assert x.transpose(0, 2).stride() == (1, 4, 12)
    assert x.swapaxes(0, 1).stride() == (4, 12, 1)
    np.testing.assert_array_equal(x.permute(2, 0, 1).numpy(), a.transpose(2, 0, 1))
    np.testing.assert_array_equal(x.permute((1, 2, 0)).numpy(), a.transpose(1, 2, 0))
    m = x[0]
    assert m.t().stride() == (1, 4) and m.T.stride() == (1, 4)
    assert x.mT.shape == (2, 4, 3) and x.mT.stride() == (12, 1, 4)
    assert x.T.shape == (4, 3, 2) and x.T.stride() == (1, 4, 12)
    v = ember.arange(3.0)
    assert v.t().shape == (3,) and v.t()._base is v
    assert ember.tensor(1.0).t().shape == ()
    assert ember.tensor(1.0).transpose(0, -1).shape == ()
    with pytest.raises(IndexError):
        x.transpose(0, 3)
    with pytest.raises(RuntimeError, match="duplicate"):
        x.permute(0, 0, 1)
    with pytest.raises(RuntimeError):
        x.permute(0, 1)
    with pytest.raises(RuntimeError, match="<= 2 dimensions"):
        x.t()
    with pytest.raises(RuntimeError, match="mT"):
        _ = v.mT


def test_unsqueeze_squeeze():
    x = ember.arange(6.0).view(2, 3)
    assert x.unsqueeze(0).shape == (1, 2, 3) and x.unsqueeze(0).stride() == (6, 3, 1)
    assert x.unsqueeze(1).stride() == (3, 3, 1)
    assert x.unsqueeze(2).stride() == (3, 1, 1)
    assert x.unsqueeze(-1).shape == (2, 3, 1)
    assert x.unsqueeze(-3).shape == (1, 2, 3)
    assert ember.tensor(1.0).unsqueeze(0).shape == (1,)
    with pytest.raises(IndexError):
        x.unsqueeze(3)
    y = ember.zeros(1, 2, 1, 3)
    assert y.squeeze().shape == (2, 3)
    assert y.squeeze(0).shape == (2, 1, 3)
    assert y.squeeze(1).shape == (1, 2, 1, 3)  # not size 1: unchanged
    assert y.squeeze((0, 2)).shape == (2, 3)
    assert y.squeeze([0, -2]).shape == (2, 3)
    assert y.squeeze(-2).stride() == (6, 3, 1)
    assert ember.tensor(1.0).squeeze().shape == () and ember.tensor(1.0).squeeze(0).shape == ()
    with pytest.raises(IndexError):
        y.squeeze(4)


def test_expand():
    x = ember.arange(3.0)
    e = x.expand(2, 3)
    assert e.shape == (2, 3) and e.stride() == (0, 1)
    np.testing.assert_array_equal(e.numpy(), np.broadcast_to(np.arange(3.0), (2, 3)))
    c = ember.arange(3.0).view(3, 1).expand(3, 4)
    assert c.stride() == (1, 0) and not c.is_contiguous()
    assert c.expand(2, -1, -1).stride() == (0, 1, 0)
    x[1] = 10.0
    assert e[1].tolist() == [0.0, 10.0, 2.0]
    with pytest.raises(RuntimeError, match="must match the existing size"):
        ember.zeros(2, 3).expand(3, 3)
    with pytest.raises(RuntimeError):
        ember.zeros(2, 3).expand(3)
    with pytest.raises(RuntimeError):
        ember.zeros(3).expand(-1, 3)


# -- select, narrow, split, chunk, unbind -----------------------------------------------------------------


def test_select_narrow_errors():
    x = ember.arange(12.0).view(3, 4)
    assert x.select(1, -4).tolist() == [0.0, 4.0, 8.0]
    with pytest.raises(IndexError):
        x.select(0, 3)
    with pytest.raises(IndexError):
        x.select(2, 0)
    with pytest.raises(IndexError):
        ember.tensor(1.0).select(0, 0)
    assert x.narrow(1, ember.tensor(1), 2).tolist() == [[1.0, 2.0], [5.0, 6.0], [9.0, 10.0]]
    assert x.narrow(1, 4, 0).shape == (3, 0)
    with pytest.raises(RuntimeError, match="exceeds dimension size"):
        x.narrow(1, 3, 2)
    with pytest.raises(IndexError, match="start out of range"):
        x.narrow(1, 5, 0)
    with pytest.raises(RuntimeError, match="non-negative"):
        x.narrow(1, 0, -1)


def test_split_chunk_unbind():
    x = ember.arange(5.0)
    assert [p.tolist() for p in x.split(2)] == [[0.0, 1.0], [2.0, 3.0], [4.0]]
    assert [p.tolist() for p in x.split(10)] == [[0.0, 1.0, 2.0, 3.0, 4.0]]
    assert [p.tolist() for p in x.split([0, 5])] == [[], [0.0, 1.0, 2.0, 3.0, 4.0]]
    assert [p.storage_offset() for p in x.split([2, 0, 3])] == [0, 2, 2]
    assert [p.tolist() for p in x.chunk(3)] == [[0.0, 1.0], [2.0, 3.0], [4.0]]
    assert len(ember.arange(3.0).chunk(5)) == 3
    assert [p.numel() for p in ember.arange(6.0).chunk(4)] == [2, 2, 2]
    assert [p.shape for p in ember.zeros(0).chunk(2)] == [(0,), (0,)]
    assert ember.zeros(0, 2).unbind() == ()
    with pytest.raises(RuntimeError, match="sum exactly"):
        x.split([2, 2])
    with pytest.raises(RuntimeError):
        x.split(0)
    with pytest.raises(RuntimeError):
        x.chunk(0)
    with pytest.raises(IndexError):
        x.unbind(1)


# -- diagonal, unfold -----------------------------------------------------------------------------------


def test_diagonal_and_unfold_edges():
    x = ember.arange(6.0).view(2, 3)
    for offset in range(-3, 5):
        np.testing.assert_array_equal(x.diagonal(offset).numpy(), np.diagonal(np.arange(6.0).reshape(2, 3), offset))
    assert x.diagonal(5).shape == (0,) and x.diagonal(5).storage_offset() == 0
    assert x.diagonal(2).storage_offset() == 2
    with pytest.raises(RuntimeError, match="cannot be identical"):
        x.diagonal(0, 1, 1)
    y = ember.arange(7.0)
    u = y.unfold(0, 3, 2)
    assert (u.shape, u.stride()) == ((3, 3), (2, 1))
    assert u.tolist() == [[0.0, 1.0, 2.0], [2.0, 3.0, 4.0], [4.0, 5.0, 6.0]]
    assert ember.tensor(3.0).unfold(0, 1, 1).shape == (1,)
    assert y.unfold(0, 0, 1).shape == (8, 0)
    with pytest.raises(RuntimeError):
        y.unfold(0, 8, 1)
    with pytest.raises(RuntimeError):
        y.unfold(0, 2, 0)


# -- complex views ----------------------------------------------------------------------------------------


def test_real_imag_views():
    data = np.array([[1 + 2j, 3 - 4j, 5j], [-1 + 0j, 2 + 2j, 0j]], np.complex64)
    z = ember.tensor(data)
    re, im = z.real, z.imag
    assert re.dtype is ember.float32 and im.dtype is ember.float32
    assert (re.shape, re.stride(), re.storage_offset()) == ((2, 3), (6, 2), 0)
    assert (im.shape, im.stride(), im.storage_offset()) == ((2, 3), (6, 2), 1)
    np.testing.assert_array_equal(re.numpy(), data.real)
    np.testing.assert_array_equal(im.numpy(), data.imag)
    assert (z.t().real.stride(), z[1, 1:].imag.storage_offset()) == ((2, 6), 9)
    # writes through real/imag reach the complex tensor
    im[0, 0] = 7.0
    re.mul_(10.0)
    assert z[0, 0].item() == 10 + 7j
    assert z._version == 2
    z.imag = ember.zeros(2, 3)
    np.testing.assert_array_equal(z.numpy().imag, 0.0)
    # a real tensor's .real is itself (a view); it has no .imag
    r = ember.tensor([1.0, 2.0])
    assert r.real.untyped_storage() is r.untyped_storage()
    with pytest.raises(RuntimeError, match="imag"):
        _ = r.imag


def test_view_as_real_and_complex():
    z = ember.tensor([[1 + 2j, 3 - 4j, 5j], [-1 + 0j, 2 + 2j, 0j]])
    vr = ember.view_as_real(z)
    assert (vr.shape, vr.stride(), vr.storage_offset(), vr.dtype) == ((2, 3, 2), (6, 2, 1), 0, ember.float32)
    np.testing.assert_array_equal(vr.numpy(), np.stack([z.numpy().real, z.numpy().imag], -1))
    assert ember.view_as_real(z[:, 1:]).storage_offset() == 2
    assert ember.view_as_real(z.t()).stride() == (2, 6, 1)
    f = ember.arange(12.0).view(3, 2, 2)
    c = ember.view_as_complex(f)
    assert (c.shape, c.stride(), c.dtype) == ((3, 2), (2, 1), ember.complex64)
    assert c.tolist() == [[1j, 2 + 3j], [4 + 5j, 6 + 7j], [8 + 9j, 10 + 11j]]
    assert ember.view_as_complex(f[1:]).storage_offset() == 2
    assert ember.view_as_complex(f.transpose(0, 1)).stride() == (1, 2)
    assert ember.view_as_complex(ember.arange(8.0, dtype=ember.float64).view(4, 2)).dtype is ember.complex128
    c[0, 0] = 5 - 5j
    assert f[0, 0].tolist() == [5.0, -5.0]
    with pytest.raises(RuntimeError):
        ember.view_as_real(ember.zeros(2))
    with pytest.raises(RuntimeError, match="last dimension of size 2"):
        ember.view_as_complex(ember.zeros(3))
    with pytest.raises(RuntimeError, match="stride 1"):
        ember.view_as_complex(ember.zeros(2, 4)[:, ::2])
    with pytest.raises(RuntimeError):
        ember.view_as_complex(ember.zeros(2, 2, dtype=ember.int64))


def test_detach_shares_storage():
    x = ember.ones(3, requires_grad=True)
    d = x.detach()
    assert not d.requires_grad and d.untyped_storage() is x.untyped_storage()
    assert d.data_ptr() == x.data_ptr()
    d[0] = 5.0
    assert x[0].item() == 5.0
    assert x._version == 1


# -- version counters and storage -----------------------------------------------------------------------


def test_version_counter_is_shared_by_views():
    x = ember.zeros(3, 4)
    v, t, d = x[1], x.t(), x.detach()
    assert x._version == v._version == t._version == 0
    v.add_(1)
    assert x._version == v._version == t._version == d._version == 1
    x[0, 0] = 5
    assert x._version == 2 and v._version == 2
    x.mul_(2)
    x.zero_()
    x.fill_(1.0)
    assert x._version == 5
    x.copy_(ember.ones(3, 4))
    assert x._version == 6
    x[[0, 1]] = 2.0
    assert x._version == 7
    x.index_put_((ember.tensor([0]),), ember.tensor(3.0))
    assert x._version == 8
    x[x > 100] = 0.0  # a write that touches nothing still counts
    assert x._version == 9
    x += 1
    assert x._version == 10 and t._version == 10


def test_out_of_place_ops_and_copies_do_not_bump():
    x = ember.zeros(3)
    y = x + 1
    _ = x[1:] * 2
    c = x.clone()
    assert x._version == 0 and y._version == 0 and c._version == 0
    c.add_(1)
    assert c._version == 1 and x._version == 0
    r = x.reshape(3)  # a view
    r += 1
    assert x._version == 1
    f = ember.zeros(2, 3).t().reshape(6)  # a copy
    f += 1
    assert f._version == 1
    x.numpy()[0] = 9.0  # writes through numpy are invisible to the counter
    assert x._version == 1
    x.requires_grad_()
    assert x._version == 1


def test_untyped_storage_identity():
    x = ember.arange(12.0).view(3, 4)
    assert x.untyped_storage() is x.t().untyped_storage() is x[1:, 2].untyped_storage()
    assert x.reshape(12).untyped_storage() is x.untyped_storage()
    assert x.clone().untyped_storage() is not x.untyped_storage()
    assert x.t().reshape(12).untyped_storage() is not x.untyped_storage()
    assert x.untyped_storage().data_ptr() == x.data_ptr()
    assert x[1:].untyped_storage().data_ptr() == x.data_ptr()


def test_data_ptr_arithmetic():
    x = ember.arange(24.0).view(2, 3, 4)
    item = x.element_size()
    assert x[1].data_ptr() - x.data_ptr() == 12 * item
    assert x[:, 2].data_ptr() - x.data_ptr() == 8 * item
    assert x[..., 3].data_ptr() - x.data_ptr() == 3 * item
    assert x.mT[0, 1].data_ptr() - x.data_ptr() == 1 * item
    assert x.transpose(0, 2).data_ptr() == x.data_ptr()
    for v in (x[1, 1:], x[:, ::2, 1], x.diagonal(1, 1, 2), x.unfold(2, 2, 2)[1]):
        storage = v.untyped_storage()
        assert v.data_ptr() == storage.data_ptr() + v.storage_offset() * item
    y = ember.arange(4, dtype=ember.int16)
    assert y[3].data_ptr() - y.data_ptr() == 6


# Expected is_contiguous() values derived from torch.
@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda x: x, True),
        (lambda x: x.t(), False),
        (lambda x: x[:, :1], False),
        (lambda x: x[:1], True),
        (lambda x: x[:, ::2], False),
        (lambda x: x.unsqueeze(1), True),
        (lambda x: x[:, 1:2], False),
        (lambda x: x[1], True),
        (lambda x: x[:, 1], False),
        (lambda x: x[1:], True),
        (lambda x: x.diagonal(), False),
        (lambda x: x[1, 1], True),
        (lambda x: x.unfold(1, 2, 2), True),
        (lambda x: x.t().t(), True),
        (lambda x: ember.zeros(3, 1).expand(3, 4), False),
        (lambda x: ember.zeros(1, 4).expand(1, 4), True),
        (lambda x: ember.zeros(4, 1).t(), True),
        (lambda x: ember.zeros(0, 3).t(), True),
    ],
)
def test_is_contiguous(make, expected):
    assert make(ember.arange(12.0).view(3, 4)).is_contiguous() is expected


def test_view_as_another_dtype_reinterprets_bytes():
    """x.view(dtype) reads the same bytes (numpy's ndarray.view is the oracle)."""
    base = np.arange(8, dtype=np.float32).reshape(2, 4)
    x = ember.from_numpy(base.copy())
    for dtype in (ember.int32, ember.uint8, ember.float64, ember.int16):
        v = x.view(dtype)
        np.testing.assert_array_equal(v.numpy(), base.view(dtype.numpy_dtype))
        assert v.untyped_storage() is x.untyped_storage()
    with pytest.raises(RuntimeError, match="divisible by 2"):
        x[:, 1:3].view(ember.float64)  # storage offset of 1 float32: not a whole float64
    with pytest.raises(RuntimeError, match="stride\\(-1\\) must be 1"):
        x.t().view(ember.float64)
    y = x.view(ember.int32)
    y[0, 0] = 7
    assert x.numpy()[0, 0] == np.array([7], np.int32).view(np.float32)[0]


def test_shapes_refuse_floats_in_pytorchs_words():
    x = ember.arange(12.0)
    for call, name, arg in ((lambda: x.reshape(4, 3.0), "reshape", "shape"), (lambda: x.view((4, 3.0)), "view", "size"),
                            (lambda: x.reshape(2, 2, 3).permute(0, 1.0, 2), "permute", "dims"),
                            (lambda: x[:1].expand(2.0, 1), "expand", "size")):
        with pytest.raises(TypeError, match=rf"{name}\(\): argument '{arg}' .* got float"):
            call()
    # integers of other types (numpy's, one-element integer tensors) are sizes, as in PyTorch
    assert x.reshape(np.int64(4), 3).shape == (4, 3)
    assert x.view(ember.tensor(4), 3).shape == (4, 3)
