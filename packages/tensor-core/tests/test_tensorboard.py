"""ember.utils.tensorboard.SummaryWriter: event files read back with TensorBoard's own reader.

numpy and PIL are the oracles: histogram buckets against numpy.histogram, images decoded from
their PNG bytes against the pixels expected from the input. The module must stay importable (and
lazy) without the tensorboard package; the writing tests skip without it.
"""

import io
import json
import os
import socket
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import ember


def _reader(log_dir):
    pytest.importorskip("tensorboard", reason="the tensorboard package is not installed (pip install tensorboard)")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(
        str(log_dir), size_guidance={"scalars": 0, "histograms": 0, "images": 0, "tensors": 0}
    )
    accumulator.Reload()
    return accumulator


@pytest.fixture
def SummaryWriter():
    pytest.importorskip("tensorboard", reason="the tensorboard package is not installed (pip install tensorboard)")
    from ember.utils.tensorboard import SummaryWriter

    return SummaryWriter


def _pixels(image_event):
    from PIL import Image

    return np.asarray(Image.open(io.BytesIO(image_event.encoded_image_string)))


def _run(code):
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_importing_the_module_does_not_import_tensorboard():
    loaded = _run(
        """
        import json, sys
        import ember, ember.utils.tensorboard
        print(json.dumps(["tensorboard" in sys.modules, ember.utils.tensorboard.__name__]))
        """
    )
    assert loaded == [False, "ember.utils.tensorboard"]


def test_without_tensorboard_using_the_writer_says_what_to_install():
    result = _run(
        """
        import json, sys
        sys.modules["tensorboard"] = None  # as if the package were not installed
        import ember.utils.tensorboard
        try:
            from ember.utils.tensorboard import SummaryWriter
        except ImportError as error:
            print(json.dumps([type(error).__name__, str(error)]))
        else:
            print(json.dumps(["no error", ""]))
        """
    )
    assert result[0] == "MissingDistributionError" and "pip install tensorboard" in result[1]


def test_scalars_steps_and_walltimes(SummaryWriter, tmp_path):
    values = [0.25, -1.5, 3.0]
    with SummaryWriter(tmp_path) as writer:
        for step, value in enumerate(values):
            writer.add_scalar("loss", ember.tensor(value, requires_grad=True), step * 10, walltime=100.0 + step)
        writer.add_scalar("python", 7, 3)
        writer.add_scalar("numpy", np.float64(0.5))
        writer.add_scalar("new", 2.5, 4, new_style=True)
        writer.add_scalar("new64", 1 / 3, 4, new_style=True, double_precision=True)
    reader = _reader(tmp_path)
    events = reader.Scalars("loss")
    assert [e.step for e in events] == [0, 10, 20]
    assert [e.value for e in events] == values
    assert [e.wall_time for e in events] == [100.0, 101.0, 102.0]
    assert reader.Scalars("python")[0].value == 7 and reader.Scalars("python")[0].step == 3
    assert reader.Scalars("numpy")[0].value == 0.5
    new = reader.Tensors("new")[0]
    assert new.step == 4 and list(new.tensor_proto.float_val) == [2.5]
    assert list(reader.Tensors("new64")[0].tensor_proto.double_val) == [1 / 3]


def test_scalar_must_have_one_element(SummaryWriter, tmp_path):
    with SummaryWriter(tmp_path) as writer, pytest.raises(ValueError, match="scalar_value"):
        writer.add_scalar("x", ember.ones(2))


def test_add_scalars_writes_one_run_per_entry(SummaryWriter, tmp_path):
    with SummaryWriter(tmp_path) as writer:
        for step in range(3):
            writer.add_scalars("train/loss", {"a": step * 1.0, "b": ember.tensor(-step * 2.0)}, step)
    assert sorted(p for p in os.listdir(tmp_path) if not p.startswith("events")) == ["train_loss_a", "train_loss_b"]
    a, b = _reader(tmp_path / "train_loss_a"), _reader(tmp_path / "train_loss_b")
    assert [(e.step, e.value) for e in a.Scalars("train/loss")] == [(0, 0.0), (1, 1.0), (2, 2.0)]
    assert [(e.step, e.value) for e in b.Scalars("train/loss")] == [(0, 0.0), (1, -2.0), (2, -4.0)]


def _expected_histogram(values, edges):
    # numpy's counts with empty buckets trimmed: one empty bucket kept before the first filled one
    counts, edges = np.histogram(values, bins=edges)
    filled = np.flatnonzero(counts)
    first, last = filled[0], filled[-1]
    if first == 0:
        return [0.0] + counts[: last + 1].tolist(), edges[: last + 2].tolist()
    return counts[first - 1 : last + 1].tolist(), edges[first : last + 2].tolist()


@pytest.mark.parametrize("bins", [7, "auto", "tensorflow"])
def test_histograms_against_numpy(SummaryWriter, tmp_path, bins):
    values = np.random.default_rng(0).normal(3.0, 2.0, size=(40, 25)).astype(np.float32)
    with SummaryWriter(tmp_path) as writer:
        writer.add_histogram("w", ember.tensor(values), 5, bins=bins)
        edges = writer.default_bins if bins == "tensorflow" else bins
    event = _reader(tmp_path).Histograms("w")[0]
    histogram = event.histogram_value
    flat = values.reshape(-1).astype(np.float64)
    assert event.step == 5 and histogram.num == flat.size
    assert (histogram.min, histogram.max) == (flat.min(), flat.max())
    np.testing.assert_allclose([histogram.sum, histogram.sum_squares], [flat.sum(), flat @ flat], rtol=1e-12)
    counts, limits = _expected_histogram(flat, edges)
    assert list(histogram.bucket) == counts and sum(counts) == flat.size
    np.testing.assert_allclose(histogram.bucket_limit, limits, rtol=1e-15)


def test_histogram_default_edges_are_tensorboards():
    from ember.utils.tensorboard._arrays import tensorflow_bucket_edges

    edges = tensorflow_bucket_edges()
    positive = edges[edges > 0]
    assert edges[len(edges) // 2] == 0 and np.array_equal(edges[: len(positive)], -positive[::-1])
    assert positive[0] == 1e-12 and positive[-1] < 1e20 <= positive[-1] * 1.1
    np.testing.assert_allclose(positive[1:] / positive[:-1], 1.1, rtol=1e-12)


def test_histogram_max_bins_merges_neighbours(SummaryWriter, tmp_path):
    values = np.arange(100, dtype=np.float64)
    with SummaryWriter(tmp_path) as writer:
        writer.add_histogram("h", values, bins=10, max_bins=3)
    histogram = _reader(tmp_path).Histograms("h")[0].histogram_value
    # 10 buckets of 10 values, merged 3 by 3 (the last group padded): 30, 30, 30, 10, plus the empty left one
    assert list(histogram.bucket) == [0, 30, 30, 30, 10]
    np.testing.assert_allclose(histogram.bucket_limit, [0.0, 29.7, 59.4, 89.1, 99.0])


def test_histogram_of_bfloat16_and_empty(SummaryWriter, tmp_path):
    with SummaryWriter(tmp_path) as writer:
        writer.add_histogram("b", ember.ones(4, dtype=ember.bfloat16) * 2, bins=4)
        with pytest.raises(ValueError, match="no element"):
            writer.add_histogram("e", ember.ones(0))
    histogram = _reader(tmp_path).Histograms("b")[0].histogram_value
    assert histogram.num == 4 and histogram.sum == 8.0


def test_images_and_dataformats(SummaryWriter, tmp_path):
    rng = np.random.default_rng(1)
    chw = rng.uniform(-0.2, 1.2, size=(3, 6, 5)).astype(np.float32)
    gray = rng.integers(0, 256, size=(6, 5), dtype=np.uint8)
    with SummaryWriter(tmp_path) as writer:
        writer.add_image("chw", ember.tensor(chw), 1)
        writer.add_image("hwc", ember.tensor(chw.transpose(1, 2, 0)), 2, dataformats="HWC")
        writer.add_image("gray", gray, 3, dataformats="HW")
        with pytest.raises(ValueError, match="dataformats"):
            writer.add_image("bad", ember.tensor(chw), dataformats="HW")
    reader = _reader(tmp_path)
    expected = (np.clip(chw.transpose(1, 2, 0) * 255, 0, 255)).astype(np.uint8)
    for tag, step in (("chw", 1), ("hwc", 2)):
        event = reader.Images(tag)[0]
        assert (event.step, event.height, event.width) == (step, 6, 5)
        np.testing.assert_array_equal(_pixels(event), expected)
    np.testing.assert_array_equal(_pixels(reader.Images("gray")[0]), np.stack([gray] * 3, axis=2))


def test_add_images_tiles_a_grid_of_eight_columns(SummaryWriter, tmp_path):
    batch = np.arange(10, dtype=np.uint8)[:, None, None, None] * np.ones((10, 1, 2, 3), dtype=np.uint8) * 20
    with SummaryWriter(tmp_path) as writer:
        writer.add_images("batch", ember.tensor(batch), 0)
        writer.add_images("nhwc", batch.transpose(0, 2, 3, 1), 0, dataformats="NHWC")
    reader = _reader(tmp_path)
    for tag in ("batch", "nhwc"):
        pixels = _pixels(reader.Images(tag)[0])
        assert pixels.shape == (4, 24, 3)  # 2 rows of 8 columns of 2x3 images, 3 channels
        assert pixels[0, 0, 0] == 0 and pixels[0, 3, 0] == 20 and pixels[2, 0, 0] == 160 and pixels[2, 3, 0] == 180
        assert (pixels[2:, 6:] == 0).all()  # the empty cells of the last row


def test_figure(SummaryWriter, tmp_path):
    matplotlib = pytest.importorskip("matplotlib", reason="matplotlib is not installed")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure = plt.figure(figsize=(2, 1), dpi=50)
    plt.plot([0, 1], [1, 0])
    with SummaryWriter(tmp_path) as writer:
        writer.add_figure("fig", figure, 2)
        writer.add_figure("figs", [plt.figure(figsize=(1, 1), dpi=40) for _ in range(2)], 2)
    assert not plt.fignum_exists(figure.number)
    reader = _reader(tmp_path)
    single, pair = reader.Images("fig")[0], reader.Images("figs")[0]
    assert (single.step, single.height, single.width) == (2, 50, 100)
    assert (pair.height, pair.width) == (40, 80) and _pixels(pair).shape == (40, 80, 3)


def test_text(SummaryWriter, tmp_path):
    with SummaryWriter(tmp_path) as writer:
        writer.add_text("notes", "**hello** wörld", 4)
    event = _reader(tmp_path).Tensors("notes/text_summary")[0]
    assert event.step == 4 and list(event.tensor_proto.string_val) == ["**hello** wörld".encode()]


def test_hparams(SummaryWriter, tmp_path):
    from tensorboard.plugins.hparams import plugin_data_pb2

    with SummaryWriter(tmp_path) as writer:
        writer.add_hparams(
            {"lr": 0.01, "optimizer": "adam", "nesterov": True, "layers": ember.tensor(3), "skip": None},
            {"hparam/accuracy": 0.75},
            hparam_domain_discrete={"optimizer": ["adam", "sgd"], "nesterov": [True, False]},
            run_name="trial0",
            global_step=9,
        )
        with pytest.raises(TypeError):
            writer.add_hparams([("lr", 1)], {})
        with pytest.raises(ValueError, match="lr"):
            writer.add_hparams({"lr": [1, 2]}, {})
    reader = _reader(tmp_path / "trial0")
    assert [(e.step, e.value) for e in reader.Scalars("hparam/accuracy")] == [(9, 0.75)]
    content = reader.PluginTagToContent("hparams")
    start = plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/session_start_info"]).session_start_info
    assert start.hparams["lr"].number_value == 0.01 and start.hparams["optimizer"].string_value == "adam"
    assert start.hparams["nesterov"].number_value == 1.0 and start.hparams["layers"].number_value == 3
    assert "skip" not in start.hparams
    experiment = plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/experiment"]).experiment
    assert [info.name for info in experiment.hparam_infos] == ["lr", "optimizer", "nesterov", "layers"]
    assert [v.string_value for v in experiment.hparam_infos[1].domain_discrete.values] == ["adam", "sgd"]
    assert [v.number_value for v in experiment.hparam_infos[2].domain_discrete.values] == [1.0, 0.0]
    assert [m.name.tag for m in experiment.metric_infos] == ["hparam/accuracy"]
    end = plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/session_end_info"]).session_end_info
    assert end.status == 1  # STATUS_SUCCESS


def test_purge_step_flush_close_and_reopen(SummaryWriter, tmp_path):
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    writer = SummaryWriter(tmp_path, purge_step=5, filename_suffix=".ember")
    writer.add_scalar("x", 1.0, 5)
    writer.flush()
    files = os.listdir(tmp_path)
    assert len(files) == 1 and files[0].startswith("events.out.tfevents.") and files[0].endswith(".ember")
    writer.close()
    writer.add_scalar("x", 2.0, 6)  # a closed writer opens a new file on use, without a second purge
    writer.close()
    assert len(os.listdir(tmp_path)) == 2
    first = [e for e in EventFileLoader(str(tmp_path / files[0])).Load()]
    starts = [e.step for e in first if e.HasField("session_log")]
    assert starts == [5]
    assert [(e.step, e.value) for e in _reader(tmp_path).Scalars("x")] == [(5, 1.0), (6, 2.0)]


def test_default_log_dir(SummaryWriter, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with SummaryWriter(comment="_lr0.1") as writer:
        log_dir = writer.get_logdir()
    head, name = os.path.split(log_dir)
    assert head == "runs" and name.endswith("_" + socket.gethostname() + "_lr0.1")
    assert os.path.isdir(tmp_path / log_dir)


def test_add_embedding_writes_the_projector_files(SummaryWriter, tmp_path):
    from google.protobuf import text_format
    from PIL import Image
    from tensorboard.plugins.projector.projector_config_pb2 import ProjectorConfig

    mat = np.array([[0.5, -1.0, 2.0], [3.0, 0.25, -0.125]], dtype=np.float32)
    thumbnails = np.stack([np.zeros((3, 2, 4)), np.ones((3, 2, 4))]).astype(np.float32)
    with SummaryWriter(tmp_path) as writer:
        writer.add_embedding(ember.tensor(mat), metadata=["cat", "dog"], label_img=ember.tensor(thumbnails), tag="a/b")
        writer.add_embedding(mat, [["x", 1], ["y", 2]], global_step=7, metadata_header=["name", "id"])
        with pytest.raises(ValueError, match="2-D"):
            writer.add_embedding(ember.ones(3))
        with pytest.raises(ValueError, match="metadata"):
            writer.add_embedding(mat, metadata=["only one"])
    first, second = tmp_path / "00000" / "a%2fb", tmp_path / "00007" / "default"
    assert (first / "tensors.tsv").read_text() == "0.5\t-1.0\t2.0\n3.0\t0.25\t-0.125\n"
    assert (first / "metadata.tsv").read_text() == "cat\ndog\n"
    assert (second / "metadata.tsv").read_text() == "name\tid\nx\t1\ny\t2\n"
    sprite = np.asarray(Image.open(first / "sprite.png"))
    # 2 thumbnails on ceil(sqrt(2)) = 2 columns: 2x8 pixels, padded with black to 8x8
    assert sprite.shape == (8, 8, 3) and (sprite[:2, :4] == 0).all() and (sprite[:2, 4:] == 255).all()
    assert (sprite[2:] == 0).all()
    config = text_format.Parse((tmp_path / "projector_config.pbtxt").read_text(), ProjectorConfig())
    assert [e.tensor_name for e in config.embeddings] == ["a/b:00000", "default:00007"]
    assert config.embeddings[0].tensor_path == "00000/a%2fb/tensors.tsv"
    assert config.embeddings[0].sprite.image_path == "00000/a%2fb/sprite.png"
    assert list(config.embeddings[0].sprite.single_image_dim) == [4, 2]
    assert (
        config.embeddings[1].metadata_path == "00007/default/metadata.tsv"
        and not config.embeddings[1].sprite.image_path
    )


def test_add_graph_is_not_supported(SummaryWriter, tmp_path):
    with SummaryWriter(tmp_path) as writer, pytest.raises(NotImplementedError, match="GraphDef"):
        writer.add_graph(ember.nn.Linear(2, 2), ember.ones(1, 2))
