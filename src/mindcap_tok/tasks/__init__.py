"""Tasks as data: task files, their datasets, prompts and answer types."""

from .load import load_task
from .mgsm import load_mgsm

__all__ = ["load_mgsm", "load_task"]
