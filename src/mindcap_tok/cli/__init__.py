"""The ``mindcap-tok`` command: one thin subcommand per pipeline stage."""

from .main import main

__all__ = ["main"]
