"""OpInfos of ember._ops.nn_conv."""

from __future__ import annotations
