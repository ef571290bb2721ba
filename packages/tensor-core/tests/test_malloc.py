"""Freed mid-size cpu tensor memory is reused, not mapped anew with a page fault per page (ember._malloc)."""

import os
import platform
import subprocess
import sys

import pytest

# Page faults per step of a loop that keeps two 512 KiB tensors alive at once (as a training step keeps
# its activations): glibc's defaults map each anew every step (128 faults per tensor).
_FAULTS = """
import resource
import numpy as np
import ember
a = ember.ones(256, 128)
b = ember.ones(128, 512)
def step():
    return ember.matmul(a, b), ember.ones(256, 512) + 1
step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(50):
    out = step()
    del out
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 50)
"""

_SETTINGS = ("EMBER_CPU_KEEP_FREED_MEMORY", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_",
             "MALLOC_ARENA_MAX", "LD_PRELOAD")


def _faults_per_step(**env):
    base = {k: v for k, v in os.environ.items() if k not in _SETTINGS}
    done = subprocess.run([sys.executable, "-c", _FAULTS], env={**base, **env}, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return float(done.stdout.split()[0])


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the settings are glibc's (mallopt)")
def test_mid_size_tensors_reuse_freed_memory_unless_the_user_chose_otherwise():
    ours = _faults_per_step()
    off = _faults_per_step(EMBER_CPU_KEEP_FREED_MEMORY="0")
    users = _faults_per_step(MALLOC_ARENA_MAX="8")  # a user's own glibc setting: ember leaves glibc alone
    assert ours < 5
    assert off > 100 and users > 100  # two 512 KiB tensors mapped anew: 256 pages a step
