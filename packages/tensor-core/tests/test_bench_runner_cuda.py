"""benchmarks/run.py's GPU rows (``--device cuda``): selection, skipping, rates, and a file of their own.

Fake workloads and an injected timer: these tests check the plumbing on any machine, GPU or not.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import textwrap
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[3]
BENCH_DIR = REPO_ROOT / "benchmarks"

if not (BENCH_DIR / "run.py").is_file():
    pytest.skip("benchmarks/ is not in this checkout", allow_module_level=True)


@pytest.fixture(scope="module")
def runner():
    saved = list(sys.path)
    name = "ember_bench_runner_cuda_under_test"
    spec = importlib.util.spec_from_file_location(name, BENCH_DIR / "run.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(name, None)
    sys.path[:] = saved


FAKE = """
    from harness import NotRun, Skip, Workload

    def _no_gpu():
        raise Skip("no GPU here")

    WORKLOADS = [
        Workload("cpu_row", lambda: (lambda: 2e-6, lambda: 1e-6)),
        Workload("gpu_copy", lambda: (lambda: 2e-3, lambda: 1e-3), device="cuda", work=4e9, unit="GB/s"),
        Workload("gpu_launch", lambda: (lambda: 1e-3, lambda: 5e-4), device="cuda", inner=100),
        Workload("gpu_bf16", lambda: (NotRun("ember: no bfloat16"), lambda: 1e-3), device="cuda",
                 work=2e12, unit="TFLOP/s"),
        Workload("gpu_missing", _no_gpu, device="cuda"),
    ]
"""


def fake_dir(tmp_path):
    directory = tmp_path / "bench"
    directory.mkdir()
    (directory / "bench_fake.py").write_text(textwrap.dedent(FAKE), encoding="utf-8")
    return directory


def rows(text, header):
    lines = text.splitlines()
    start = lines.index(header)
    out = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        out.append([c.strip() for c in line.strip().strip("|").split("|")])
    return out


def test_cuda_rows_go_to_their_own_file_with_rates(runner, tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "ROOT", tmp_path)
    bench = fake_dir(tmp_path)
    json_path = tmp_path / "r.json"
    argv = ["--device", "cuda", "--bench-dir", str(bench), "--no-plot", "--json", str(json_path)]
    assert runner.main(argv, time_fn=lambda fn, **_: fn()) == 0  # a skipped row is no failure
    assert not (tmp_path / "BENCHMARKS.md").exists()
    text = (tmp_path / "BENCHMARKS_CUDA.md").read_text(encoding="utf-8")
    table = {r[0]: r for r in rows(text, runner.CUDA_TABLE_HEADER)}
    assert list(table) == ["gpu_copy", "gpu_launch", "gpu_bf16", "gpu_missing"]
    assert table["gpu_copy"][1:6] == ["2 ms", "1 ms", "2.00", "2000 GB/s", "4000 GB/s"]
    assert table["gpu_launch"][1:4] == ["10 µs", "5 µs", "2.00"]  # 100 operations per call
    assert table["gpu_bf16"][1:6] == ["—", "1 ms", "—", "—", "2000 TFLOP/s"]
    assert table["gpu_missing"][1] == "skipped"
    assert "ember: no bfloat16" in text and "no GPU here" in text
    payload = json.loads(json_path.read_text(encoding="utf-8"))
    assert payload["device"] == "cuda"
    copy = next(r for r in payload["results"] if r["name"] == "gpu_copy")
    assert copy["ember_rate"] == pytest.approx(2000.0) and copy["torch_rate"] == pytest.approx(4000.0)


def test_cpu_run_leaves_the_cuda_rows_out(runner, tmp_path, capsys):
    bench = fake_dir(tmp_path)
    assert runner.main(["--list", "--bench-dir", str(bench)]) == 0
    assert capsys.readouterr().out.split() == ["cpu_row"]
    assert runner.main(["--list", "--device", "cuda", "--bench-dir", str(bench)]) == 0
    assert capsys.readouterr().out.split() == ["gpu_copy", "gpu_launch", "gpu_bf16", "gpu_missing"]


def test_gpu_rows_use_the_wall_clock_and_min_run_time(runner, tmp_path):
    import time

    bench = fake_dir(tmp_path)
    seen = []

    def time_fn(fn, *, threads, **timing):
        seen.append(timing)
        return 1e-3

    argv = ["--device", "cuda", "--clock", "thread", "--min-run-time", "0.05", "-k", "gpu_copy",
            "--bench-dir", str(bench), "--output", str(tmp_path / "c.md"), "--no-plot"]
    assert runner.main(argv, time_fn=time_fn) == 0
    assert seen == [{"min_run_time": 0.05}] * 2
    assert all(t.get("timer") is not time.thread_time for t in seen)


def test_the_suite_defines_the_issue_8_gpu_rows(runner, capsys):
    assert runner.main(["--list", "--device", "cuda"]) == 0
    names = set(capsys.readouterr().out.split())
    assert {
        "cuda_add_16elem_launch", "cuda_add_2^28_f32", "cuda_clone_2^28_f32", "cuda_matmul_8192_f32",
        "cuda_matmul_8192_bf16", "cuda_softmax_8192x8192", "cuda_layer_norm_8192x8192",
        "cuda_training_mlp_adam_b128", "cuda_training_cnn_adam_b64", "cuda_training_transformer_adamw",
    } <= names
    assert runner.main(["--list"]) == 0
    assert not any(n.startswith("cuda_") for n in capsys.readouterr().out.split())
