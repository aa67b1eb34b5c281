"""Data loaders (FLORES-200) and language-code tables; MGSM's files are read by its task (:mod:`mindcap_tok.tasks`)."""

from .flores import load_flores
from .languages import resolve_language

__all__ = ["load_flores", "resolve_language"]
