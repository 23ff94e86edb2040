"""CLI commands of the document (segment) lane."""

from __future__ import annotations

import click


def register(group: click.Group) -> None:
    """Add the document-lane commands to the main group."""
