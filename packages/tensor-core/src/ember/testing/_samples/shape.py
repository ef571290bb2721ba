"""OpInfos of ember._ops.shape."""

from __future__ import annotations
