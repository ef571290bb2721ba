"""ember.utils.tensorboard.SummaryWriter against torch.utils.tensorboard.SummaryWriter.

The same calls go to both writers (ember tensors to one, torch tensors of the same values to the
other); both logs are read back with TensorBoard's EventAccumulator and compared record by record.
"""

import os

import numpy as np
import pytest

import ember

pytestmark = pytest.mark.parity

torch = pytest.importorskip("torch")
pytest.importorskip("tensorboard", reason="the tensorboard package is not installed (pip install tensorboard)")
try:
    from torch.utils.tensorboard import SummaryWriter as TorchWriter
except ImportError as error:  # torch's writer needs the tensorboard package too
    pytest.skip(f"torch.utils.tensorboard is unavailable: {error}", allow_module_level=True)

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402

from ember.utils.tensorboard import SummaryWriter  # noqa: E402

_WALLTIME = 1234.5


def _read(log_dir):
    reader = EventAccumulator(str(log_dir), size_guidance={"scalars": 0, "histograms": 0, "images": 0, "tensors": 0})
    reader.Reload()
    return reader


def _log(writer, lib):
    """The same calls for both writers; ``lib`` is ember or torch."""
    rng = np.random.default_rng(3)
    weights = rng.normal(size=(64, 32)).astype(np.float32)
    image = rng.uniform(0, 1, size=(3, 7, 9)).astype(np.float32)
    batch = rng.integers(0, 256, size=(5, 1, 4, 6), dtype=np.uint8)
    for step in range(3):
        writer.add_scalar("loss", lib.tensor(1.0 / (step + 1)), step, walltime=_WALLTIME)
        writer.add_scalar("lr", 0.1 * step, step, walltime=_WALLTIME)
        writer.add_scalars("pair", {"a": step * 2.0, "b": lib.tensor(-float(step))}, step, walltime=_WALLTIME)
    writer.add_scalar("new", 2.5, 1, walltime=_WALLTIME, new_style=True)
    writer.add_histogram("w", lib.tensor(weights), 1, walltime=_WALLTIME)
    writer.add_histogram("w_auto", lib.tensor(weights), 1, bins="auto", walltime=_WALLTIME)
    writer.add_histogram("w_max", lib.tensor(weights), 1, bins=50, max_bins=7, walltime=_WALLTIME)
    writer.add_image("img", lib.tensor(image), 2, walltime=_WALLTIME)
    writer.add_image("img_hwc", image.transpose(1, 2, 0), 2, walltime=_WALLTIME, dataformats="HWC")
    writer.add_images("batch", lib.tensor(batch), 2, walltime=_WALLTIME)
    writer.add_text("note", "step **two**", 2, walltime=_WALLTIME)
    domains = {"opt": ["sgd", "adam"], "wd": [True, False]}
    hparams = {"lr": 0.1, "opt": "sgd", "wd": True, "skip": None}
    points = rng.normal(size=(5, 3)).astype(np.float32)
    thumbnails = rng.uniform(0, 1, size=(5, 3, 2, 3)).astype(np.float32)
    writer.add_embedding(lib.tensor(points), metadata=list("abcde"), label_img=lib.tensor(thumbnails), tag="e/1")
    writer.add_embedding(points, [["x", 1]] * 5, global_step=3, metadata_header=["name", "id"])
    writer.add_hparams(hparams, {"hp/acc": 0.5}, hparam_domain_discrete=domains, run_name="hp", global_step=4)


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    root = tmp_path_factory.mktemp("tensorboard")
    with SummaryWriter(root / "ember") as writer:
        _log(writer, ember)
    with TorchWriter(str(root / "torch")) as writer:
        _log(writer, torch)
    return root / "ember", root / "torch"


def test_same_files_and_runs(logs):
    ours, theirs = logs
    assert sorted(p for p in os.listdir(ours) if not p.startswith("events")) == sorted(
        p for p in os.listdir(theirs) if not p.startswith("events")
    )


def test_same_tags(logs):
    ours, theirs = (_read(path).Tags() for path in logs)
    assert ours == theirs


def test_same_scalars(logs):
    ours, theirs = (_read(path) for path in logs)
    for tag in ("loss", "lr"):
        assert ours.Scalars(tag) == theirs.Scalars(tag)
    for run in ("pair_a", "pair_b"):
        assert _read(logs[0] / run).Scalars("pair") == _read(logs[1] / run).Scalars("pair")
    assert ours.Tensors("new") == theirs.Tensors("new")


def test_same_histograms(logs):
    ours, theirs = (_read(path) for path in logs)
    for tag in ("w", "w_auto", "w_max"):
        a, b = ours.Histograms(tag)[0], theirs.Histograms(tag)[0]
        assert (a.step, a.wall_time) == (b.step, b.wall_time)
        assert list(a.histogram_value.bucket) == list(b.histogram_value.bucket)
        np.testing.assert_allclose(a.histogram_value.bucket_limit, b.histogram_value.bucket_limit, rtol=1e-12)
        for field in ("min", "max", "num", "sum", "sum_squares"):
            assert getattr(a.histogram_value, field) == pytest.approx(getattr(b.histogram_value, field), rel=1e-12)


def test_same_images(logs):
    import io

    from PIL import Image

    ours, theirs = (_read(path) for path in logs)
    for tag in ("img", "img_hwc", "batch"):
        a, b = ours.Images(tag)[0], theirs.Images(tag)[0]
        assert (a.step, a.height, a.width) == (b.step, b.height, b.width)
        pixels = [np.asarray(Image.open(io.BytesIO(e.encoded_image_string))) for e in (a, b)]
        np.testing.assert_array_equal(*pixels)


def test_same_text_and_hparams(logs):
    ours, theirs = (_read(path) for path in logs)
    assert ours.Tensors("note/text_summary") == theirs.Tensors("note/text_summary")
    hp_ours, hp_theirs = _read(logs[0] / "hp"), _read(logs[1] / "hp")
    assert [(e.step, e.value) for e in hp_ours.Scalars("hp/acc")] == [
        (e.step, e.value) for e in hp_theirs.Scalars("hp/acc")
    ]
    assert hp_ours.PluginTagToContent("hparams") == hp_theirs.PluginTagToContent("hparams")


def test_same_embedding_files(logs):
    from PIL import Image

    ours, theirs = logs
    for name in ("projector_config.pbtxt", "00000/e%2f1/tensors.tsv", "00000/e%2f1/metadata.tsv",
                 "00003/default/tensors.tsv", "00003/default/metadata.tsv"):  # fmt: skip
        assert (ours / name).read_text() == (theirs / name).read_text(), name
    sprites = [np.asarray(Image.open(root / "00000" / "e%2f1" / "sprite.png")) for root in logs]
    np.testing.assert_array_equal(*sprites)
