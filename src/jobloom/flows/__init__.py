"""Flows: the DAG declaration, runs of it in the store, executing map and sub-flow nodes, stopping runs,
and the flow operations the app exposes."""

from __future__ import annotations
