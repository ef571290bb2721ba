"""DataLoader with 2 worker processes over image-sized batches: shared memory vs pickled copies.

Run as a script (``python benchmarks/dataloader_shared_memory.py``): it times one epoch of 16
batches of 32 float32 images 3x224x224 (19 MB a batch), with the workers' batches sent through
shared memory (``ember.multiprocessing``, the default) and as pickled copies (the transfer
format before it), taking turns, min of the repeats. Not a ``bench_*`` module: worker processes don't fit
``run.py``'s timer loop.
"""

from __future__ import annotations

import argparse
import time

import numpy as np


class _Images:
    """``n`` images 3x224x224 float32, each made from its index (the work a decoder would do)."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        import ember

        return ember.from_numpy(np.full((3, 224, 224), float(i), np.float32)), i


def _epoch(loader):
    start = time.perf_counter()
    total = 0.0
    for images, _ in loader:
        total += float(images[0, 0, 0, 0])
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    options = parser.parse_args()

    from ember.utils.data import DataLoader, _worker

    dataset = _Images(16 * 32)
    best = {True: float("inf"), False: float("inf")}
    for _ in range(options.repeat):
        for shared in (False, True):
            _worker.SHARE_MEMORY = shared
            loader = DataLoader(dataset, batch_size=32, num_workers=2, multiprocessing_context="fork")
            best[shared] = min(best[shared], _epoch(loader))
    _worker.SHARE_MEMORY = True
    print(f"pickled copies: {best[False] * 1e3:.0f} ms/epoch, shared memory: {best[True] * 1e3:.0f} ms/epoch, "
          f"speedup x{best[False] / best[True]:.2f}")


if __name__ == "__main__":
    main()
