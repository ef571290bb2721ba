"""Derivatives of the shape ops."""

from __future__ import annotations
