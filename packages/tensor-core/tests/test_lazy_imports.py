"""What ``import ember`` leaves out until it is needed, and that it works once loaded.

``import ember`` must not import ml_dtypes (most of a second); ``ember.bfloat16`` gets its
numpy dtype on first use, and every table keyed by numpy dtypes learns it then (see
docs/internals.rst, "Import time"). Each check runs in a fresh interpreter, since this
test process has long since loaded ml_dtypes. Not timed: ``benchmarks/bench_import.py``
measures the import's speed.
"""

from __future__ import annotations

import importlib.machinery
import importlib.metadata
import json
import subprocess
import sys
import textwrap

import ml_dtypes
import numpy as np
import pytest

from ember import _entry_points

_BF16 = np.dtype(ml_dtypes.bfloat16)


def _run(code):
    """Run ``code`` in a fresh interpreter; its last stdout line, parsed as JSON."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_import_ember_leaves_the_slow_modules_out():
    loaded = _run(
        """
        import json, sys
        import ember
        print(json.dumps([m for m in ("ml_dtypes", "importlib.metadata", "numpy.random", "ember.profiler")
                          if m in sys.modules]))
        """
    )
    assert loaded == []


def test_autograd_profiler_loads_on_first_use():
    # ember.autograd.profiler (and the ember.profiler it wraps) are imported when first named, not by import ember
    found = _run(
        """
        import json, sys
        import ember
        before = "ember.profiler" in sys.modules
        profile = ember.autograd.profiler.profile
        from ember.autograd.profiler import record_function
        print(json.dumps([before, "ember.profiler" in sys.modules, profile.__module__,
                          record_function is ember.profiler.record_function]))
        """
    )
    assert found == [False, True, "ember.autograd.profiler", True]


def test_extensions_and_subpackages_are_there_after_import():
    found = _run(
        """
        import json, ember
        print(json.dumps([hasattr(ember, name) for name in ("autograd", "optim", "fx", "nn", "bfloat16")]
                         + ember._extensions.loaded_extensions()))
        """
    )
    assert found[:5] == [True] * 5
    assert {"ember.autograd", "ember.fx"} <= set(found[5:])


def test_float32_programs_never_load_ml_dtypes(tmp_path):
    # ops that special-case bfloat16 must not read its numpy dtype for other dtypes (0.7 s at the first call)
    loaded = _run(
        f"""
        import json, sys
        import ember
        from ember import nn
        x = ember.randn(4, 5)
        x.sort(); x.argsort(); x.topk(2); x.any(); x.all(); ember.count_nonzero(x); x.median(); x.unique()
        (x * 2 + 1).softmax(-1).sum(); ember.finfo(ember.float32); ember.zeros(3, dtype=ember.float16) + 1
        model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 10))
        optimizer = ember.optim.AdamW(model.parameters())
        loss = nn.functional.cross_entropy(model(ember.randn(2, 3, 8, 8)), ember.tensor([1, 2]))
        loss.backward()
        optimizer.step()
        ember.save(model.state_dict(), {str(tmp_path / "m.pt")!r})
        model.load_state_dict(ember.load({str(tmp_path / "m.pt")!r}))
        str(x)
        print(json.dumps("ml_dtypes" in sys.modules))
        """
    )
    assert loaded is False


# The bfloat16 uses that need its numpy dtype, each after a lazy load.
_BF16_USES = """
import json, sys
import numpy as np
import ember

out = {"after_import": "ml_dtypes" in sys.modules}
# promotion between ember dtypes needs no numpy dtype
out["promoted"] = [str(ember.promote_types(ember.bfloat16, ember.float16)),
                   str(ember.promote_types(ember.bfloat16, ember.int64))]
out["after_promotion"] = "ml_dtypes" in sys.modules
t = ember.tensor([1.5, 2.25, -3.0], dtype=ember.bfloat16)
out["after_tensor"] = "ml_dtypes" in sys.modules
out["values"], out["dtype"], out["numpy_dtype"] = t.tolist(), str(t.dtype), str(t.numpy().dtype)
out["result_dtypes"] = [str((t + ember.ones(3)).dtype), str((t * 2).dtype),
                        str((t + ember.ones(3, dtype=ember.float16)).dtype), str(t.double().dtype)]
info = ember.finfo(ember.bfloat16)
out["finfo"] = [info.bits, info.eps, info.max, info.tiny, info.resolution]
# reductions compute bfloat16 in float32 (their set of low-precision numpy dtypes learned bfloat16)
out["sum"] = ember.tensor([1 + 0.01 * i for i in range(1, 301)], dtype=ember.bfloat16).sum().item()
# autograd records bfloat16 ops (its set of differentiable numpy dtypes learned bfloat16)
x = ember.tensor([1.0, 2.0, 3.0], dtype=ember.bfloat16, requires_grad=True)
y = (x * x).sum()
y.backward()
out["grad"], out["y_requires_grad"] = x.grad.tolist(), y.requires_grad
print(json.dumps(out))
"""


def test_bfloat16_works_after_a_lazy_load():
    out = _run(_BF16_USES)
    assert out["after_import"] is False and out["after_promotion"] is False
    assert out["promoted"] == ["ember.float32", "ember.bfloat16"]
    assert out["after_tensor"] is True
    assert out["values"] == [1.5, 2.25, -3.0]
    assert out["dtype"] == "ember.bfloat16" and out["numpy_dtype"] == "bfloat16"
    assert out["result_dtypes"] == ["ember.float32", "ember.bfloat16", "ember.float32", "ember.float64"]
    info = ml_dtypes.finfo(ml_dtypes.bfloat16)
    assert out["finfo"] == [16, float(info.eps), float(info.max), float(info.smallest_normal), 0.01]
    values = np.array([1 + 0.01 * i for i in range(1, 301)]).astype(ml_dtypes.bfloat16)
    expected = float(values.astype(np.float32).sum().astype(ml_dtypes.bfloat16))
    assert float(values.sum()) != expected  # (summing in bfloat16 would give another answer)
    assert out["sum"] == expected
    assert out["grad"] == [2.0, 4.0, 6.0] and out["y_requires_grad"] is True


def test_bfloat16_file_loads_in_a_process_that_never_used_bfloat16(tmp_path):
    path = tmp_path / "bf16.pt"
    _run(
        f"""
        import ember
        ember.save({{"w": ember.tensor([0.5, -1.25, 3.0], dtype=ember.bfloat16)}}, {str(path)!r})
        print("null")
        """
    )
    out = _run(
        f"""
        import json, sys, ember
        before = "ml_dtypes" in sys.modules
        w = ember.load({str(path)!r})["w"]
        print(json.dumps([before, str(w.dtype), w.tolist(), str(w.numpy().dtype)]))
        """
    )
    assert out == [False, "ember.bfloat16", [0.5, -1.25, 3.0], "bfloat16"]


def test_array_made_with_ml_dtypes_before_ember_used_bfloat16():
    out = _run(
        """
        import json
        import ml_dtypes, numpy as np
        import ember
        a = np.array([1.0, 2.5], dtype=ml_dtypes.bfloat16)
        t = ember.from_numpy(a)
        print(json.dumps([str(t.dtype), (t + 1).tolist(), str(ember.as_tensor(a).dtype), str((t * t).sum().dtype)]))
        """
    )
    assert out == ["ember.bfloat16", [2.0, 3.5], "ember.bfloat16", "ember.bfloat16"]


def test_numpy_dtype_sets_learn_bfloat16_when_ml_dtypes_loads():
    out = _run(
        """
        import json, sys
        import numpy as np
        from ember import _dtype as D
        s = D.numpy_dtype_set((D.float16, D.bfloat16))
        before = sorted(str(d) for d in s)
        D.load_ml_dtypes()
        after = sorted(str(d) for d in s)
        late = sorted(str(d) for d in D.numpy_dtype_set((D.bfloat16, D.int8)))  # made after the load
        print(json.dumps([before, after, late, D.from_numpy_dtype(np.dtype("bfloat16")).name]))
        """
    )
    assert out == [["float16"], ["bfloat16", "float16"], ["bfloat16", "int8"], "bfloat16"]


def test_bfloat16_numpy_dtype_is_ml_dtypes_bfloat16():
    import ember

    assert ember.bfloat16.numpy_dtype == _BF16
    assert ember.bfloat16.itemsize == 2
    assert ember._dtype.from_numpy_dtype(_BF16) is ember.bfloat16
    with pytest.raises(AttributeError, match="no attribute 'not_a_field'"):
        ember.bfloat16.not_a_field  # noqa: B018


# ---------------------------------------------------------------------------
# ember._entry_points: the same answers as importlib.metadata


def test_entry_points_match_importlib_metadata_for_every_group():
    groups = {ep.group for dist in importlib.metadata.distributions() for ep in dist.entry_points}
    assert "ember.extensions" in groups
    assert _entry_points._metadata_dirs() is not None  # (the fast path answers, not importlib.metadata)
    for group in sorted(groups):
        ours = [(ep.name, ep.value, ep.group) for ep in _entry_points.entry_points(group)]
        theirs = [(ep.name, ep.value, ep.group) for ep in importlib.metadata.entry_points(group=group)]
        assert ours == theirs, group


def _fake_distribution(root, folder, entry_points_txt):
    info = root / folder
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {folder.split('-')[0]}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(entry_points_txt)


def test_entry_points_of_fake_distributions_match_importlib_metadata(tmp_path, monkeypatch):
    first, second = tmp_path / "a", tmp_path / "b"
    _fake_distribution(first, "fake_pkg-1.0.dist-info", "# a comment\n[ember.extensions]\nx = fake_x\n\n[other]\ny=m:f\n")
    # the same distribution again, later on sys.path: importlib.metadata reads only the first one
    _fake_distribution(second, "Fake.Pkg-2.0.dist-info", "[ember.extensions]\nshadowed = fake_shadowed\n")
    _fake_distribution(second, "egg_style.egg-info", "[ember.extensions]\n z = mod.sub : obj.attr [extra]\n")
    monkeypatch.setattr(sys, "path", [str(first), str(tmp_path / "missing"), str(second)])
    importlib.invalidate_caches()
    assert _entry_points._metadata_dirs() is not None
    for group in ("ember.extensions", "other"):
        ours = [(ep.name, ep.value) for ep in _entry_points.entry_points(group)]
        theirs = [(ep.name, ep.value) for ep in importlib.metadata.entry_points(group=group)]
        assert ours == theirs
    assert [ep.name for ep in _entry_points.entry_points("ember.extensions")] == ["x", "z"]


def test_entry_point_load_imports_the_named_object():
    point = _entry_points.EntryPoint("name", "json.decoder : JSONDecoder.decode", "g")
    assert point.load() is json.decoder.JSONDecoder.decode
    assert _entry_points.EntryPoint("name", "json", "g").load() is json
    with pytest.raises(ValueError, match="malformed"):
        _entry_points.EntryPoint("name", "not a module!", "g").load()


def test_entry_points_go_through_importlib_metadata_for_other_finders(monkeypatch):
    class Finder:  # a finder that lists distributions of its own: only importlib.metadata knows to ask it
        @staticmethod
        def find_distributions(*args, **kwargs):
            return []

    seen = []
    monkeypatch.setattr(sys, "meta_path", [Finder(), *sys.meta_path])
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group: seen.append(group) or ["sentinel"])
    assert _entry_points.entry_points("ember.extensions") == ["sentinel"]
    assert seen == ["ember.extensions"]


def test_entry_points_go_through_importlib_metadata_for_a_zip_on_sys_path(tmp_path, monkeypatch):
    archive = tmp_path / "dists.zip"
    archive.write_bytes(b"PK\x05\x06" + b"\0" * 18)  # an empty zip file
    monkeypatch.setattr(sys, "path", [str(archive), *sys.path])
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group: ["sentinel"])
    assert _entry_points.entry_points("ember.extensions") == ["sentinel"]
    assert importlib.machinery.PathFinder in sys.meta_path
