"""ember._C's OpenMP threads spin only briefly when idle (ember._openmp, set while the extension loads)."""

import os
import subprocess
import sys

import pytest

# The process's CPU time while it sleeps 50 ms right after a parallel region (an add of 1M floats on
# two threads): what the idle worker burns busy-waiting. Median of five regions, in ms.
_IDLE_CPU = """
import os, statistics, time
import numpy as np
import ember
assert "GOMP_SPINCOUNT" not in os.environ or os.environ.get("EMBER_TEST_USER_SPIN")
ember.set_num_threads(2)
x = ember.from_numpy(np.ones(1 << 20, np.float32))
spent = []
for _ in range(5):
    x + x
    c = time.process_time()
    time.sleep(0.05)
    spent.append(time.process_time() - c)
print(statistics.median(spent) * 1e3)
"""


def _idle_cpu_ms(env):
    done = subprocess.run([sys.executable, "-c", _IDLE_CPU], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return float(done.stdout.strip())


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs two CPUs for a second OpenMP thread")
def test_idle_threads_sleep_soon_unless_the_user_chose_otherwise():
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    ours = _idle_cpu_ms(env)
    # libgomp's default (300,000 spins) set by the user is kept: 4-8 ms of spinning per region here
    theirs = _idle_cpu_ms({**env, "GOMP_SPINCOUNT": "300000", "EMBER_TEST_USER_SPIN": "1"})
    assert ours < 1.5
    assert theirs > 3 * ours


def test_the_setting_is_removed_after_the_import(monkeypatch):
    from ember import _openmp

    monkeypatch.delenv("GOMP_SPINCOUNT", raising=False)
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    with _openmp.short_spin_waits():
        assert os.environ["GOMP_SPINCOUNT"] == _openmp.SPIN_COUNT
    assert "GOMP_SPINCOUNT" not in os.environ
    monkeypatch.setenv("OMP_WAIT_POLICY", "active")
    with _openmp.short_spin_waits():
        assert "GOMP_SPINCOUNT" not in os.environ
    # a user's own spin count is kept, during the block and after it
    monkeypatch.delenv("OMP_WAIT_POLICY")
    monkeypatch.setenv("GOMP_SPINCOUNT", "7")
    with _openmp.short_spin_waits():
        assert os.environ["GOMP_SPINCOUNT"] == "7"
    assert os.environ["GOMP_SPINCOUNT"] == "7"
