"""Derivatives of the nn_functional ops."""

from __future__ import annotations
