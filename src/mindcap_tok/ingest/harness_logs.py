"""Import another harness's run logs into a ledger: a reader per harness, one validated, atomic append.

A reader is ``read(paths, tokenizer, *, tasks)`` returning an object with ``records`` (ledger record dicts) and
``over_cap`` (how many re-encode to more ids than their cap); :data:`READERS` names each by module and function,
imported on use (the inspect reader needs the ``inspect`` extra). Every record of every file is read, mapped and
checked before the one commit, so a bad log leaves the ledger as it was; rerunning skips records already stored
identically. A record the ledger refuses is one line naming its file and line (the reader's ``sources``), and a
write that fails (a full disk) is one line saying that nothing was committed.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Sequence

from ..errors import BadInputError, StorageError, first_line
from ..store import Ledger, RecordError, ShardInfo
from ..tokenization.load import ResolvedTokenizer, load_tokenizer
from .jsonl import ImportResult

#: ``--from`` value -> (module of this package, reader function)
READERS = {
    "lm-eval": ("mindcap_tok.ingest.lmeval", "read_lmeval_logs"),
    "inspect": ("mindcap_tok.ingest.inspect_logs", "read_logs"),
    "lighteval": ("mindcap_tok.ingest.lighteval", "read_lighteval_details"),
}


def import_logs(
    paths: Sequence[str | os.PathLike[str]],
    ledger: str | os.PathLike[str] | Ledger,
    *,
    source: str,
    tokenizer: str | ResolvedTokenizer,
    tokenizers_dir: str | os.PathLike[str] | None = None,
    tasks: Sequence[str | os.PathLike[str]] = (),
) -> ImportResult:
    """Add the records of ``source``'s logs at ``paths`` (files or folders) to ``ledger`` (created if absent).

    ``tokenizer`` is the model's (texts logged without ids are re-encoded with it); ``tasks`` are the
    user's task files for tasks not built in. Nothing is stored unless every record is valid.
    """
    if source not in READERS:
        raise BadInputError(f"unknown log source {source!r}; use one of {', '.join(READERS)}", key="from")
    module, function = READERS[source]
    try:
        read = getattr(importlib.import_module(module), function)
    except (ImportError, AttributeError) as exc:
        raise BadInputError(f"importing {source} logs is not available in this installation ({exc})") from exc
    led = ledger if isinstance(ledger, Ledger) else Ledger(ledger)
    led.check_new_location()
    tok = load_tokenizer(tokenizer, tokenizers_dir) if isinstance(tokenizer, str) else tokenizer
    got = read(list(paths), tok, tasks=tasks)
    name = ", ".join(map(str, paths))
    if not got.records:
        raise BadInputError(f"the {source} logs at {name} hold no records")
    written = commit(led, got.records, tok=tok, name=name, sources=getattr(got, "sources", None))
    added = sum(s.rows for s in written)
    retok = sum(bool(r.get("retokenized")) for r in got.records)
    return ImportResult(
        name,
        str(led.root),
        len(got.records),
        added,
        len(got.records) - added,
        retok,
        written,
        got.over_cap,
        partial=sum(bool(r.get("output_partial")) for r in got.records),
        prompt_truncated=getattr(got, "prompt_truncated", 0),
    )


def commit(
    led: Ledger, records: list[dict], *, tok: ResolvedTokenizer, name: str, sources: Sequence[str] | None = None
) -> list[ShardInfo]:
    """Append ``records`` (read from the logs ``name``) to ``led`` in one commit; return the shards written.

    A refused record is one line naming where it came from (``sources[i]``, else the record); a failed write
    (``OSError``: a full disk, a read-only folder) is one line saying that nothing was committed, since the
    import is one commit and the store removes what it had written.
    """
    try:
        return led.append(records, {tok.name: tok}, skip_existing=True)
    except RecordError as exc:
        if sources is None:
            raise
        other = "" if exc.other is None else f" (and {sources[exc.other]})"
        raise BadInputError(f"{sources[exc.index]}: {exc}{other}") from exc
    except OSError as exc:
        why = exc.strerror or first_line(exc)
        raise StorageError(
            f"import of {name} stopped ({why}): 0 records committed to {led.root} (the import is one commit); "
            "rerun once the problem is fixed"
        ) from exc
