"""Data loaders (FLORES-200, MGSM) and language-code tables."""

from .flores import load_flores
from .languages import resolve_language
from .mgsm import load_mgsm

__all__ = ["load_flores", "load_mgsm", "resolve_language"]
