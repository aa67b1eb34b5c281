"""Library messages: one policy.

A library module never prints and never calls ``warnings.warn``: it logs to its own logger,
``logging.getLogger(__name__)`` (``mindcap_tok.<module>``), ``warning`` for something the user should act on and
``info`` for a note. Bad input is not a message but a :class:`~mindcap_tok.errors.MindcapError`; a note that is
part of a result (a pricing's triage notes, say) stays in the result's data. The CLI calls :func:`install` once,
which prints each message as one line on stderr, ``warning: <message>`` or ``note: <message>``; a library user
configures ``logging`` as they like (without a handler, Python prints warnings bare on stderr).
"""

from __future__ import annotations

import logging
import sys

#: the package's root logger: every module's logger is below it
ROOT = "mindcap_tok"


class _LineHandler(logging.Handler):
    """One ``warning: …`` / ``note: …`` line per record on the current ``sys.stderr`` (so captures see it)."""

    def emit(self, record: logging.LogRecord) -> None:
        prefix = "warning" if record.levelno >= logging.WARNING else "note"
        print(f"{prefix}: {record.getMessage()}", file=sys.stderr, flush=True)


def install() -> None:
    """Route the package's messages (notes and up) to stderr as one-line ``warning:``/``note:`` lines; idempotent."""
    logger = logging.getLogger(ROOT)
    if not any(isinstance(h, _LineHandler) for h in logger.handlers):
        logger.addHandler(_LineHandler())
    logger.setLevel(logging.INFO)
