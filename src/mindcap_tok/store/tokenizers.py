"""Which tokenizer a ledger's ids belong to: the one resolution policy of every command that scores.

Policy (:func:`resolve_tokenizers`): each tokenizer name in the records resolves to the override tokenizer
when one is given, else to a tokenizer given for that name, else to ``load_tokenizer(name, tokenizers_dir)``.
When the ledger's manifest recorded a SHA-256 for that name (``Ledger.tokenizers()``) and the resolved
tokenizer's hash differs, the ids may not belong to it: that is a :class:`TokenizerMismatchError` naming the
tokenizer and both hashes, unless the caller allows it (``allow_mismatch=True``, on the command line
``--allow-tokenizer-mismatch``). A name the manifest does not record (records read without a ledger) is not
checked.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from ..errors import MindcapError, with_context
from ..tokenization.load import ResolvedTokenizer, load_tokenizer
from .ledger import Ledger

#: the command-line spelling of ``allow_mismatch=True``
ALLOW_MISMATCH_FLAG = "--allow-tokenizer-mismatch"


class TokenizerMismatchError(MindcapError):
    """The tokenizer resolved for a name is not the one whose hash the ledger recorded for that name.

    Attributes: ``name`` (the records' tokenizer name), ``used`` (the resolved tokenizer's own name),
    ``recorded`` and ``actual`` (full SHA-256 hex digests).
    """

    names_source = False  # its message stands alone (no spec file named in front)

    def __init__(self, name: str, used: str, recorded: str, actual: str) -> None:
        self.name, self.used, self.recorded, self.actual = name, used, recorded, actual
        given = "" if used == name else f" (resolved to {used})"
        super().__init__(
            f"tokenizer {name!r}{given} has sha256 {actual[:12]}…, but the ledger recorded {recorded[:12]}… for "
            f"its ids; pass {ALLOW_MISMATCH_FLAG} (allow_mismatch=True) to score with it anyway"
        )


def recorded_hashes(ledger: Ledger | Mapping[str, Mapping] | None) -> dict[str, str]:
    """Tokenizer name -> SHA-256 the ledger's manifest recorded (``{}`` for ``None``)."""
    if ledger is None:
        return {}
    entries = ledger.tokenizers() if isinstance(ledger, Ledger) else ledger
    return {name: str(entry["sha256"]) for name, entry in entries.items() if entry.get("sha256")}


def check_tokenizer(
    name: str, tokenizer: ResolvedTokenizer, *, recorded: Mapping[str, str], allow_mismatch: bool = False
) -> None:
    """Raise :class:`TokenizerMismatchError` when ``recorded[name]`` exists, differs from the tokenizer's hash
    and ``allow_mismatch`` is false."""
    want = recorded.get(name)
    if want is not None and want != tokenizer.sha256 and not allow_mismatch:
        raise TokenizerMismatchError(name, tokenizer.name, want, tokenizer.sha256)


def resolve_tokenizers(
    names: Iterable[str],
    ledger: Ledger | Mapping[str, Mapping] | None = None,
    *,
    override: ResolvedTokenizer | None = None,
    given: Mapping[str, ResolvedTokenizer] | None = None,
    tokenizers_dir: str | os.PathLike[str] | None = None,
    allow_mismatch: bool = False,
) -> dict[str, ResolvedTokenizer]:
    """Tokenizer per distinct name in ``names`` (first-seen order), by the module's policy.

    ``ledger``: the :class:`Ledger` (or its ``tokenizers()`` mapping) whose recorded hashes are checked;
    ``override``: one tokenizer for every name; ``given``: tokenizers by name, tried before loading.
    """
    recorded = recorded_hashes(ledger)
    supplied = dict(given or {})
    out: dict[str, ResolvedTokenizer] = {}
    for name in dict.fromkeys(names):
        if override is not None:
            tok = override
        elif name in supplied:
            tok = supplied[name]
        else:
            try:
                tok = load_tokenizer(name, tokenizers_dir)
            except MindcapError as exc:
                raise with_context(
                    exc,
                    f"cannot load the tokenizer {name!r} that these records name ({exc}); "
                    "name the tokenizer their ids belong to with --tokenizer NAME|FILE",
                ) from exc
        check_tokenizer(name, tok, recorded=recorded, allow_mismatch=allow_mismatch)
        out[name] = tok
    return out
