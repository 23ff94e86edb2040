"""CLI commands of the fact substrate."""

from __future__ import annotations

import click


def register(group: click.Group) -> None:
    """Add the fact commands to the main group."""
