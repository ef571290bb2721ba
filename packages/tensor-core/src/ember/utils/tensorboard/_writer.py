"""``SummaryWriter``: PyTorch's TensorBoard logger, writing through the ``tensorboard`` package."""

import io
import os
import socket
import time
from datetime import datetime

import numpy as np

from ember._extensions import MissingDistributionError

from . import _arrays

try:
    from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2, tensor_shape_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter
except ImportError as error:  # pragma: no cover - exercised only without the package
    raise MissingDistributionError(
        "ember.utils.tensorboard needs the tensorboard package: pip install tensorboard "
        "(or pip install 'ember-core[tensorboard]')",
        distribution="tensorboard",
        name="tensorboard",
    ) from error

_TEXT_PLUGIN = "text"
_SCALARS_PLUGIN = "scalars"


def _default_log_dir(comment):
    # PyTorch's: runs/<Mon><DD>_<HH>-<MM>-<SS>_<hostname><comment>
    stamp = datetime.now().strftime("%b%d_%H-%M-%S")
    return os.path.join("runs", f"{stamp}_{socket.gethostname()}{comment}")


def _summary(tag, **fields):
    return summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, **fields)])


def _png(hwc_uint8):
    from PIL import Image  # a dependency of tensorboard

    buffer = io.BytesIO()
    Image.fromarray(hwc_uint8).save(buffer, format="PNG")
    height, width, channels = hwc_uint8.shape
    return summary_pb2.Summary.Image(
        height=height, width=width, colorspace=channels, encoded_image_string=buffer.getvalue()
    )


def _figure_rgb(figure, close):
    """A matplotlib figure rendered as an ``(H, W, 3)`` uint8 array (alpha dropped)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    rgb = np.asarray(canvas.buffer_rgba())[:, :, :3].copy()
    if close:
        import matplotlib.pyplot as plt

        plt.close(figure)
    return rgb


class SummaryWriter:
    """Write TensorBoard event files, as ``torch.utils.tensorboard.SummaryWriter``.

    Every ``add_*`` call appends a summary event to an event file in ``log_dir``; events are queued
    and written by a background thread (every ``flush_secs`` seconds, when ``max_queue`` events are
    waiting, and at :meth:`flush`/:meth:`close`). Tensors are converted with
    ``.detach().cpu().numpy()``; numpy arrays and Python numbers are accepted too. Files are
    written by the ``tensorboard`` package (no TensorFlow or PyTorch needed), so TensorBoard and any
    of its readers open them.

    Args:
        log_dir (str, optional): directory of the event files; default
            ``runs/<date>_<time>_<hostname><comment>``.
        comment (str): appended to the default ``log_dir``; ignored when ``log_dir`` is given.
        purge_step (int, optional): a resumed run: TensorBoard hides the events of earlier runs in
            this directory whose step is at least ``purge_step``.
        max_queue (int): events queued before an ``add_*`` call writes them. Default 10.
        flush_secs (int): seconds between automatic flushes. Default 120.
        filename_suffix (str): appended to every event file's name.

    Example::

        >>> with SummaryWriter("runs/demo") as writer:                 # doctest: +SKIP
        ...     writer.add_scalar("loss", 0.5, global_step=1)
        ...     writer.add_histogram("weights", ember.randn(1000), 1)
    """

    def __init__(self, log_dir=None, comment="", purge_step=None, max_queue=10, flush_secs=120, filename_suffix=""):
        self.log_dir = str(log_dir) if log_dir else _default_log_dir(comment)
        self.purge_step = purge_step
        self.max_queue = max_queue
        self.flush_secs = flush_secs
        self.filename_suffix = filename_suffix
        self.default_bins = _arrays.tensorflow_bucket_edges()
        self._writers = {}  # directory -> EventFileWriter; the main one and add_scalars' ones
        self._projector_config = None  # add_embedding's list of embeddings
        self._main_writer()

    # -- files ---------------------------------------------------------------------------------

    def _event_writer(self, directory):
        writer = self._writers.get(directory)
        if writer is None:
            writer = EventFileWriter(directory, self.max_queue, self.flush_secs, self.filename_suffix)
            self._writers[directory] = writer
        return writer

    def _main_writer(self):
        # Created again on use after close(), as PyTorch's writer does.
        new = self.log_dir not in self._writers
        writer = self._event_writer(self.log_dir)
        if new and self.purge_step is not None:
            # A START session log at purge_step tells TensorBoard to drop older events from that step on.
            writer.add_event(event_pb2.Event(step=self.purge_step, file_version="brain.Event:2"))
            start = event_pb2.SessionLog(status=event_pb2.SessionLog.START)
            writer.add_event(event_pb2.Event(step=self.purge_step, session_log=start))
            self.purge_step = None
        return writer

    def _write(self, summary, global_step, walltime, writer=None):
        event = event_pb2.Event(summary=summary, wall_time=time.time() if walltime is None else float(walltime))
        if global_step is not None:
            event.step = int(_arrays.to_scalar(global_step, argument="global_step"))
        (writer or self._main_writer()).add_event(event)

    def get_logdir(self):
        """The directory the event files are written to."""
        return self.log_dir

    # -- scalars -------------------------------------------------------------------------------

    def add_scalar(self, tag, scalar_value, global_step=None, walltime=None, new_style=False, double_precision=False):
        """Log one number.

        Args:
            tag (str): the series' name.
            scalar_value: a Python number or one-element tensor/array.
            global_step (int, optional): the step (x axis).
            walltime (float, optional): seconds since the epoch; default now.
            new_style (bool): write a tensor summary (TensorBoard's "scalars" plugin) instead of a
                ``simple_value``; loads faster in TensorBoard.
            double_precision (bool): with ``new_style``, store a float64.

        Raises:
            ValueError: ``scalar_value`` has more than one element.
        """
        value = _arrays.to_scalar(scalar_value)
        if not new_style:
            summary = _summary(tag, simple_value=value)
        else:
            dtype = "DT_DOUBLE" if double_precision else "DT_FLOAT"
            tensor = tensor_pb2.TensorProto(dtype=dtype)  # no shape: a scalar
            (tensor.double_val if double_precision else tensor.float_val).append(value)
            metadata = summary_pb2.SummaryMetadata(
                plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name=_SCALARS_PLUGIN)
            )
            summary = _summary(tag, tensor=tensor, metadata=metadata)
        self._write(summary, global_step, walltime)

    def add_scalars(self, main_tag, tag_scalar_dict, global_step=None, walltime=None):
        """Log several numbers in one chart: each ``tag_scalar_dict`` entry is a run in its own
        directory ``<log_dir>/<main_tag>_<tag>`` (``/`` in ``main_tag`` replaced by ``_``), all under
        the tag ``main_tag``.

        Args:
            main_tag (str): the chart's tag.
            tag_scalar_dict (dict): name -> number or one-element tensor.
            global_step (int, optional), walltime (float, optional): as :meth:`add_scalar`.
        """
        if not isinstance(tag_scalar_dict, dict):
            raise TypeError(f"tag_scalar_dict must be a dict, got {type(tag_scalar_dict).__name__}")
        walltime = time.time() if walltime is None else walltime
        self._main_writer()
        for tag, value in tag_scalar_dict.items():
            directory = self.log_dir + "/" + main_tag.replace("/", "_") + "_" + tag
            summary = _summary(main_tag, simple_value=_arrays.to_scalar(value, argument=f"tag_scalar_dict[{tag!r}]"))
            self._write(summary, global_step, walltime, writer=self._event_writer(directory))

    # -- histograms ----------------------------------------------------------------------------

    def add_histogram(self, tag, values, global_step=None, bins="tensorflow", walltime=None, max_bins=None):
        """Log a histogram of the values of a tensor (flattened).

        Args:
            tag (str): the series' name.
            values: tensor, array or numbers, any shape; must be finite.
            global_step (int, optional), walltime (float, optional): as :meth:`add_scalar`.
            bins: ``"tensorflow"`` (TensorBoard's exponential buckets, the default), or anything
                :func:`numpy.histogram` takes (``"auto"``, ``"fd"``, an int, edges).
            max_bins (int, optional): merge neighbouring buckets until at most this many are left.

        Raises:
            ValueError: ``values`` is empty.
        """
        array = _arrays.to_numpy(values, argument="values")
        if isinstance(bins, str) and bins == "tensorflow":
            bins = self.default_bins
        fields = _arrays.histogram(array, bins, max_bins)
        self._write(_summary(tag, histo=summary_pb2.HistogramProto(**fields)), global_step, walltime)

    def add_histogram_raw(
        self, tag, min, max, num, sum, sum_squares, bucket_limits, bucket_counts, global_step=None, walltime=None
    ):
        """Log a histogram computed elsewhere: ``bucket_counts[i]`` values fell at or below
        ``bucket_limits[i]`` (and above the previous limit).

        Raises:
            ValueError: ``bucket_limits`` and ``bucket_counts`` differ in length.
        """
        if len(bucket_limits) != len(bucket_counts):
            raise ValueError(
                f"bucket_limits and bucket_counts must have the same length, got {len(bucket_limits)} "
                f"and {len(bucket_counts)}"
            )
        histo = summary_pb2.HistogramProto(
            min=min, max=max, num=num, sum=sum, sum_squares=sum_squares,
            bucket_limit=list(bucket_limits), bucket=list(bucket_counts),
        )  # fmt: skip
        self._write(_summary(tag, histo=histo), global_step, walltime)

    # -- images --------------------------------------------------------------------------------

    def add_image(self, tag, img_tensor, global_step=None, walltime=None, dataformats="CHW"):
        """Log an image, stored as PNG.

        Args:
            tag (str): the image's name.
            img_tensor: ``(C, H, W)`` by default (C = 1, 3 or 4); ``dataformats`` names another layout
                (``"HWC"``, ``"HW"``). uint8 values are taken as 0..255, any other dtype as 0..1.
            global_step (int, optional), walltime (float, optional): as :meth:`add_scalar`.
            dataformats (str): the layout of ``img_tensor``.

        Raises:
            ValueError: ``dataformats`` does not match ``img_tensor``'s dimensions.
        """
        hwc = _arrays.to_hwc(_arrays.to_numpy(img_tensor, argument="img_tensor"), dataformats)
        self._write(_summary(tag, image=_png(_arrays.to_uint8(hwc))), global_step, walltime)

    def add_images(self, tag, img_tensor, global_step=None, walltime=None, dataformats="NCHW"):
        """Log a batch of images as one image: a grid of 8 columns.

        Args:
            img_tensor: ``(N, C, H, W)`` by default (C = 1 or 3); ``dataformats="NHWC"`` for the other
                layout. Values as :meth:`add_image`.
        """
        hwc = _arrays.to_hwc(_arrays.to_numpy(img_tensor, argument="img_tensor"), dataformats)
        self._write(_summary(tag, image=_png(_arrays.to_uint8(hwc))), global_step, walltime)

    def add_figure(self, tag, figure, global_step=None, close=True, walltime=None):
        """Log a matplotlib figure (or a list of figures, as one grid image) rendered to RGB.

        Args:
            figure: a ``matplotlib.figure.Figure`` or a list of them (same size).
            close (bool): close the figure(s) afterwards.
        """
        if isinstance(figure, (list, tuple)):
            batch = np.stack([_figure_rgb(f, close) for f in figure])
            self.add_images(tag, batch, global_step, walltime, dataformats="NHWC")
        else:
            self.add_image(tag, _figure_rgb(figure, close), global_step, walltime, dataformats="HWC")

    # -- text and hyperparameters --------------------------------------------------------------

    def add_text(self, tag, text_string, global_step=None, walltime=None):
        """Log a string (Markdown), shown by TensorBoard's text tab under ``<tag>/text_summary``."""
        from tensorboard.plugins.text import plugin_data_pb2

        metadata = summary_pb2.SummaryMetadata(
            plugin_data=summary_pb2.SummaryMetadata.PluginData(
                plugin_name=_TEXT_PLUGIN, content=plugin_data_pb2.TextPluginData(version=0).SerializeToString()
            )
        )
        tensor = tensor_pb2.TensorProto(
            dtype="DT_STRING",
            string_val=[str(text_string).encode("utf-8")],
            tensor_shape=tensor_shape_pb2.TensorShapeProto(dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=1)]),
        )
        self._write(_summary(tag + "/text_summary", metadata=metadata, tensor=tensor), global_step, walltime)

    def add_hparams(self, hparam_dict, metric_dict, hparam_domain_discrete=None, run_name=None, global_step=None):
        """Log one set of hyperparameters and the metrics they gave, for TensorBoard's HPARAMS tab.

        Written to a run of its own, ``<log_dir>/<run_name>`` (default: the current time), with the
        metrics as scalars there.

        Args:
            hparam_dict (dict): name -> bool, str, int, float, one-element tensor or None (skipped);
                bools are stored as the numbers 1 and 0, as PyTorch's writer stores them.
            metric_dict (dict): metric tag -> number; use tags not logged with add_scalar elsewhere.
            hparam_domain_discrete (dict, optional): name -> list of every value it can take.
            run_name (str, optional): the run's directory name.
            global_step (int, optional): the step of the events.

        Raises:
            TypeError: the dicts are not dicts, or a value has another type.
        """
        from ._hparams import hparams_summaries

        if type(hparam_dict) is not dict or type(metric_dict) is not dict:
            raise TypeError("hparam_dict and metric_dict should be dictionary.")
        summaries = hparams_summaries(hparam_dict, metric_dict, hparam_domain_discrete)
        run_dir = os.path.join(self._main_writer().get_logdir(), run_name or str(time.time()))
        with SummaryWriter(log_dir=run_dir) as run:
            for summary in summaries:
                run._write(summary, global_step, None)
            for tag, value in metric_dict.items():
                run.add_scalar(tag, value, global_step)

    # -- not supported -------------------------------------------------------------------------

    def add_graph(self, model, input_to_model=None, verbose=False, use_strict_trace=True):
        """Not supported: TensorBoard's graph tab reads a TensorFlow ``GraphDef`` with PyTorch-style
        node attributes, which needs a tracer mapping ember ops to it; not written yet.

        Raises:
            NotImplementedError: always.
        """
        raise NotImplementedError(
            "SummaryWriter.add_graph is not supported by ember yet: it needs the model traced into a "
            "TensorBoard GraphDef (PyTorch does this with its JIT tracer); log scalars, histograms and "
            "images instead, or print the graph of ember.fx.symbolic_trace(model)"
        )

    def add_embedding(self, mat, metadata=None, label_img=None, global_step=None, tag="default", metadata_header=None):
        """Save points for TensorBoard's projector (PCA/t-SNE views).

        Writes ``<log_dir>/<global_step, 5 digits>/<tag>/tensors.tsv`` (and ``metadata.tsv``,
        ``sprite.png``) and rewrites ``<log_dir>/projector_config.pbtxt`` to list every embedding
        this writer added.

        Args:
            mat: ``(N, D)``: one row per point.
            metadata (list, optional): ``N`` labels, or ``N`` rows of ``len(metadata_header)`` cells.
            label_img (optional): ``(N, C, H, W)`` thumbnails (C = 1 or 3, values 0..1).
            global_step (int, optional): default 0.
            tag (str): the embedding's name.
            metadata_header (list, optional): column names of table ``metadata``.

        Raises:
            ValueError: ``mat`` is not 2-D, or ``metadata``/``label_img`` do not have ``N`` entries.
        """
        from google.protobuf import text_format
        from tensorboard.plugins.projector.projector_config_pb2 import ProjectorConfig

        from . import _embedding

        mat = _arrays.to_numpy(mat, argument="mat")
        if mat.ndim != 2:
            raise ValueError(f"mat must be 2-D (points, features), got shape {tuple(mat.shape)}")
        if metadata is not None and len(metadata) != mat.shape[0]:
            raise ValueError(f"metadata must have one entry per row of mat ({mat.shape[0]}), got {len(metadata)}")
        if label_img is not None:
            label_img = _arrays.to_numpy(label_img, argument="label_img")
            if label_img.ndim != 4 or label_img.shape[0] != mat.shape[0]:
                raise ValueError(
                    f"label_img must be (N, C, H, W) with N = {mat.shape[0]} (rows of mat), "
                    f"got shape {tuple(label_img.shape)}"
                )
        step = 0 if global_step is None else int(_arrays.to_scalar(global_step, argument="global_step"))
        subdir = f"{step:05d}/{_embedding.encode_tag(tag)}"
        log_dir = self._main_writer().get_logdir()
        directory = os.path.join(log_dir, subdir)
        if os.path.isfile(directory):
            raise NotADirectoryError(f"add_embedding: {directory} exists and is a file")
        os.makedirs(directory, exist_ok=True)
        if metadata is not None:
            _embedding.write_metadata(metadata, directory, metadata_header)
        if label_img is not None:
            _embedding.write_sprite(label_img, directory)
        _embedding.write_tensors(mat, directory)
        # The config lists every embedding of this writer; files cannot be appended to everywhere,
        # so it is rewritten whole each time, as PyTorch's writer does.
        if self._projector_config is None:
            self._projector_config = ProjectorConfig()
        info = _embedding.embedding_info(tag, step, subdir, metadata is not None, label_img)
        self._projector_config.embeddings.append(info)
        with open(os.path.join(log_dir, "projector_config.pbtxt"), "w", encoding="utf-8") as file:
            file.write(text_format.MessageToString(self._projector_config))

    # -- lifetime ------------------------------------------------------------------------------

    def flush(self):
        """Write every queued event to disk now."""
        for writer in self._writers.values():
            writer.flush()

    def close(self):
        """Flush and close the event files; a later ``add_*`` call opens new ones."""
        for writer in self._writers.values():
            writer.flush()
            writer.close()
        self._writers = {}

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()
