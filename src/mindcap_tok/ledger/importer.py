"""Import generations produced elsewhere (one JSON object per line) into a ledger.

Each line holds ``model, arm, lang, item, sample, seed, cap, announced, prompt, prompt_ids, output_ids, text,
finish_reason, gold, generator`` and optionally ``announce_style, forcing, design, template_id,
generator_version``. When ``output_ids`` (or ``prompt_ids``) is missing, the text is tokenized with the
ledger tokenizer and the record is marked ``retokenized`` (decode-then-encode does not round-trip, so such
token counts are approximations of what the model generated).

The file is imported in batches, each committed atomically: an interrupted import leaves a valid ledger
holding the batches committed so far, and rerunning the same command skips the records already stored.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..data.mgsm import parse_gold
from ..errors import MindcapError
from ..tokenizer import ResolvedTokenizer, canonical_model_name, load_tokenizer
from .schema import COLUMNS
from .store import Ledger, ShardInfo

BATCH_RECORDS = 2000


@dataclass
class ImportResult:
    """What an import did: lines read, records added, records skipped as already stored, retokenized ones."""

    source: str
    ledger: str
    read: int = 0
    added: int = 0
    skipped: int = 0
    retokenized: int = 0
    shards: list[ShardInfo] = field(default_factory=list)


def _lines(path: Path) -> Iterator[tuple[int, dict]]:
    try:
        fh = path.open(encoding="utf-8")
    except OSError as exc:
        raise MindcapError(f"cannot read {path}: {exc}") from exc
    with fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except ValueError as exc:
                raise MindcapError(f"{path}:{number}: not valid JSON ({exc.msg})") from exc
            if not isinstance(obj, dict):
                raise MindcapError(f"{path}:{number}: expected a JSON object, got {type(obj).__name__}")
            yield number, obj


class _Tokenizers:
    """The tokenizer of each record: the one named by ``--tokenizer``, else resolved from its model."""

    def __init__(self, fixed: ResolvedTokenizer | None, tokenizers_dir) -> None:
        self.fixed = fixed
        self.dir = tokenizers_dir
        self.by_model: dict[str, ResolvedTokenizer] = {}

    def __call__(self, model: str) -> ResolvedTokenizer:
        if self.fixed is not None:
            return self.fixed
        if model not in self.by_model:
            self.by_model[model] = load_tokenizer(canonical_model_name(model) or model, self.dir)
        return self.by_model[model]


def _record(obj: dict, where: str, tokenizer: ResolvedTokenizer) -> tuple[dict, bool]:
    unknown = sorted(set(obj) - set(COLUMNS))
    if unknown:
        raise MindcapError(f"{where}: unknown key(s) {', '.join(unknown)}")
    rec = dict(obj)
    if isinstance(rec.get("gold"), str):
        rec["gold"] = parse_gold(rec["gold"], where)
    retokenized = bool(rec.get("retokenized", False))
    for ids_key, text_key in (("output_ids", "text"), ("prompt_ids", "prompt")):
        if rec.get(ids_key) is None:
            if not isinstance(rec.get(text_key), str):
                raise MindcapError(f"{where}: neither {ids_key} nor a {text_key} string to tokenize")
            rec[ids_key] = tokenizer.tokenizer.encode(rec[text_key], add_special_tokens=False).ids
            retokenized = True
    rec["retokenized"] = retokenized
    rec["tokenizer"] = tokenizer.name
    return rec, retokenized


def import_jsonl(
    path: str | os.PathLike[str],
    ledger: str | os.PathLike[str] | Ledger,
    tokenizer: str | ResolvedTokenizer | None = None,
    *,
    tokenizers_dir: str | os.PathLike[str] | None = None,
    batch_records: int = BATCH_RECORDS,
    on_progress: Callable[[int], None] | None = None,
) -> ImportResult:
    """Add the records of a JSONL file to ``ledger`` (created if absent); see the module docs.

    ``tokenizer`` names the tokenizer the ids belong to (default: each record's model). Records already
    stored are skipped, so rerunning an interrupted import completes it. ``on_progress(records)`` is
    called after each committed batch.
    """
    source = Path(path)
    led = ledger if isinstance(ledger, Ledger) else Ledger(ledger)
    fixed = load_tokenizer(tokenizer, tokenizers_dir) if isinstance(tokenizer, str) else tokenizer
    resolve = _Tokenizers(fixed, tokenizers_dir)
    result = ImportResult(str(source), str(led.root))
    batch: list[dict] = []
    first_line: list[int] = []

    def flush() -> None:
        if not batch:
            return
        toks = {rec["tokenizer"]: resolve(rec["model"]) for rec in batch}
        try:
            written = led.append(batch, toks, skip_existing=True)
        except MindcapError as exc:
            # name the file line of the record the store complains about ("record i (...)")
            msg = str(exc)
            named = re.match(r"record (\d+) ", msg)
            if named:
                msg = f"{source}:{first_line[int(named.group(1))]}: {msg}"
            raise MindcapError(msg) from exc
        added = sum(s.rows for s in written)
        result.added += added
        result.skipped += len(batch) - added
        result.shards.extend(written)
        if on_progress is not None:
            on_progress(result.read)
        batch.clear()
        first_line.clear()

    for number, obj in _lines(source):
        where = f"{source}:{number}"
        if not isinstance(obj.get("model"), str):
            raise MindcapError(f"{where}: 'model' must be a string")
        rec, retok = _record(obj, where, resolve(obj["model"]))
        result.read += 1
        result.retokenized += retok
        batch.append(rec)
        first_line.append(number)
        if len(batch) >= batch_records:
            flush()
    flush()
    if result.read == 0:
        raise MindcapError(f"{source} holds no records")
    return result
