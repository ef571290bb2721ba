"""The files of TensorBoard's projector plugin, for ``SummaryWriter.add_embedding``.

An embedding is a directory ``<log_dir>/<step, 5 digits>/<tag>`` holding ``tensors.tsv`` (one
row per point), optionally ``metadata.tsv`` (labels) and ``sprite.png`` (a square grid of one
thumbnail per point), and an entry in ``<log_dir>/projector_config.pbtxt`` naming them.
"""

import io
import math
import os

import numpy as np

from . import _arrays


def encode_tag(tag):
    """``tag`` usable as one directory name: ``%``, ``/`` and ``\\`` escaped as ``%25``, ``%2f``, ``%5c``."""
    return tag.replace("%", "%25").replace("/", "%2f").replace("\\", "%5c")


def write_tensors(mat, directory):
    with open(os.path.join(directory, "tensors.tsv"), "w", encoding="utf-8") as file:
        for row in mat.tolist():
            file.write("\t".join(str(value) for value in row) + "\n")


def write_metadata(metadata, directory, header=None):
    """One label per line, or with ``header`` a table: the header row, then one row per point."""
    if header:
        if any(len(row) != len(header) for row in metadata):
            raise ValueError(f"metadata rows must have {len(header)} columns, as metadata_header")
        lines = ["\t".join(str(cell) for cell in row) for row in [header, *metadata]]
    else:
        lines = [str(label) for label in metadata]
    with open(os.path.join(directory, "metadata.tsv"), "w", encoding="utf-8") as file:
        file.write("\n".join(lines) + "\n")


def write_sprite(label_img, directory):
    """``label_img`` ``(N, C, H, W)`` (C = 1 or 3, values 0..1) tiled on a square PNG, as the
    projector expects: ceil(sqrt(N)) columns, the grid padded with black to a square."""
    from PIL import Image

    columns = math.ceil(math.sqrt(label_img.shape[0]))
    grid = _arrays.tile(label_img, columns).transpose(1, 2, 0)
    side = grid.shape[1]
    square = np.zeros((side, side, 3), dtype=np.float64)
    square[: grid.shape[0]] = grid
    buffer = io.BytesIO()
    Image.fromarray(np.clip(square * 255, 0, 255).astype(np.uint8)).save(buffer, format="PNG")
    with open(os.path.join(directory, "sprite.png"), "wb") as file:
        file.write(buffer.getvalue())


def embedding_info(tag, global_step, subdir, has_metadata, label_img):
    from tensorboard.plugins.projector.projector_config_pb2 import EmbeddingInfo

    info = EmbeddingInfo(tensor_name=f"{tag}:{global_step:05d}", tensor_path=f"{subdir}/tensors.tsv")
    if has_metadata:
        info.metadata_path = f"{subdir}/metadata.tsv"
    if label_img is not None:
        info.sprite.image_path = f"{subdir}/sprite.png"
        info.sprite.single_image_dim.extend([label_img.shape[3], label_img.shape[2]])  # width, height
    return info
