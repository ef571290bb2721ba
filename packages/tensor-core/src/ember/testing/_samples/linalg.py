"""OpInfos of ember._ops.linalg."""

from __future__ import annotations
