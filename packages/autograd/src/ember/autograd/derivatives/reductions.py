"""Derivatives of the reductions ops."""

from __future__ import annotations
