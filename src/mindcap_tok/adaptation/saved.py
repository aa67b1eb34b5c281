"""Saved extensions: build the extended ``tokenizer.json``, write fold folders atomically, load and apply them.

A saved extension is a folder with ``tokenizer.json`` (loads with ``tokenizers.Tokenizer.from_file`` and
``transformers.AutoTokenizer.from_pretrained``), the base folder's ``tokenizer_config.json`` /
``special_tokens_map.json`` when it had them, and ``manifest.json`` (base and corpus identity, fold membership,
seed, size rule, measured effect). A cross-fit output folder holds one ``fold-<k>`` folder per fold and
``summary.json``.

A tiktoken base gives a folder with ``<base stem>-extended.tiktoken`` (the base rank file's bytes unchanged, new
ranks appended as ``<base64 bytes> <rank>`` lines) and ``encoding.json`` (the base's, with the new file name,
the new rank file's ``sha256`` when the base's records one, and ``n_ranks``), plus the same ``manifest.json``.
Its ``tokenizer_sha256`` is the hash tiktoken tokenizers are known by (rank file bytes then ``encoding.json``).

A SentencePiece base gives a folder with ``tokenizer.model`` (the base ``ModelProto`` with the new pieces appended,
loadable by ``sentencepiece``: the artifact of record, hashed as ``tokenizer_sha256``) and the same
``manifest.json``, whose ``sentencepiece`` entry records scores, trainer-spec rules and missing characters.

What differs by family (the files, how they are checked, what the manifest adds) is one :class:`ExtensionFiles`
per family, which the base's back end picks (:func:`files_of`).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Protocol

from tokenizers import Tokenizer

from .._io import new_folder, regular_file
from .._json import dumps_strict
from ..data.languages import resolve_language
from ..errors import BadInputError, DamagedDataError, StorageError
from ..tokenization.base import ExtensionFamilies
from ..tokenization.hf import HFBackend, encode_texts
from ..tokenization.load import ResolvedTokenizer, load_tokenizer
from ..tokenization.sentencepiece_family import SentencePieceBackend, hf_tokenizer_json, load_sentencepiece, processor
from ..tokenization.tiktoken_family import TiktokenBackend, build_tiktoken, load_tiktoken, tiktoken_sha256
from .corpus import Corpus, ItemId, flores_corpus
from .extend import Extension, base_bpe, base_tiktoken
from .extend_sp import PieceExtension, extended_model

MANIFEST = "manifest.json"
#: the extended SentencePiece model's file name in a saved extension folder
SP_MODEL = "tokenizer.model"
#: where a SentencePiece extension's tokenizer.json for transformers goes (beside it, it would shadow the .model)
HF_FOLDER = "transformers"
#: what to do when the tokenizer.json cannot segment like the .model
HF_REMEDY = (
    "pieces built from characters missing from the base vocabulary are unreachable in transformers (it turns "
    "unknown characters into bytes before merging); relearn with --add-missing-characters (add_missing_characters"
    "=True), which adds them as single-character pieces first and so changes their base segmentation"
)
SUMMARY = "summary.json"
#: the producer an extension folder's output marker names (``extend``, ``price --save-extension``, the API)
PRODUCER = "mindcap-tok extension"
FORMAT = "mindcap-tok/extension/1"
#: files copied from the base tokenizer's folder so transformers sees the same special tokens and templates
COPIED_FILES = ("tokenizer_config.json", "special_tokens_map.json")


@dataclass(frozen=True, eq=False)
class TiktokenFiles:
    """An extended tiktoken encoding: rank file name and bytes, ``encoding.json`` bytes, all ranks, specials."""

    rank_name: str
    rank_data: bytes
    spec_data: bytes
    spec: dict
    ranks: dict[bytes, int]

    @property
    def sha256(self) -> str:
        return tiktoken_sha256(self.rank_data, self.spec_data)


@lru_cache(maxsize=8)
def tiktoken_extension_files(ext: Extension) -> TiktokenFiles:
    """The ``.tiktoken`` + ``encoding.json`` pair of a tiktoken extension: base ranks byte for byte, new appended."""
    info = base_tiktoken(ext.base)
    ranks = dict(info.ranks)
    lines = []
    for k, b in enumerate(ext.new_tokens):
        rank = ext.first_new_id + k
        if not isinstance(b, bytes) or b in ranks:
            raise DamagedDataError(f"new token {b!r} is not new bytes (a corrupt extension)")
        ranks[b] = rank
        lines.append(base64.b64encode(b) + b" " + str(rank).encode("ascii") + b"\n")
    base_data = info.rank_data if info.rank_data.endswith(b"\n") else info.rank_data + b"\n"
    rank_data = base_data + b"".join(lines)
    rank_name = f"{info.rank_file.stem}-extended.tiktoken"
    spec = dict(info.spec)
    spec["name"] = f"{spec.get('name', info.rank_file.stem)}-extended"
    if "file" in spec:
        spec["file"] = rank_name
    if "sha256" in spec:
        spec["sha256"] = hashlib.sha256(rank_data).hexdigest()
    if "n_ranks" in spec:
        spec["n_ranks"] = len(ranks)
    spec_data = (json.dumps(spec, indent=1, ensure_ascii=False) + "\n").encode("utf-8")
    return TiktokenFiles(rank_name, rank_data, spec_data, spec, ranks)


def check_extended_tiktoken(tok: ResolvedTokenizer, ext: Extension) -> None:
    """Raise unless every base rank and special id is kept and new ranks decode to their bytes."""
    base_bytes = ext.base.token_bytes
    got = tok.token_bytes
    if len(got) != ext.first_new_id + ext.n_new_tokens:
        raise DamagedDataError(f"extended tokenizer has {len(got)} ids, expected {ext.first_new_id + ext.n_new_tokens}")
    moved = [i for i, b in enumerate(base_bytes) if got[i] != b]
    if moved:
        raise DamagedDataError(f"extended tokenizer changed {len(moved)} base ids (e.g. {moved[0]})")
    if tok.special_ids != ext.base.special_ids:
        raise DamagedDataError("extended tokenizer changed the special token ids")
    for k, b in enumerate(ext.new_tokens):
        if got[ext.first_new_id + k] != b:
            raise DamagedDataError(f"new token {b!r} is not at id {ext.first_new_id + k}")


@lru_cache(maxsize=8)
def sentencepiece_model(ext: Extension) -> bytes:
    """The serialised extended ``.model`` of a SentencePiece extension."""
    return files_of(ext).model(ext)


@dataclass(frozen=True)
class TransformersExport:
    """The ``tokenizer.json`` of a SentencePiece extension and its probe: ``text`` is ``None`` when the probe found
    texts that it segments unlike the ``.model``."""

    text: str | None
    probed: int
    differing: int
    #: what the probe read: ``"held-out"`` texts (against ``sentencepiece`` on the ``.model``), or ``"training"``
    #: texts (against the learner's segmentation) when no held-out text was given
    probe_on: str = "held-out"

    def as_dict(self) -> dict:
        written = self.text is not None
        out: dict[str, object] = {"tokenizer_json": f"{HF_FOLDER}/tokenizer.json" if written else None}
        out |= {"probe_texts": self.probed, "probe_differing": self.differing, "probe_on": self.probe_on}
        return out if written else {**out, "remedy": HF_REMEDY}


@lru_cache(maxsize=8)
def transformers_export(ext: Extension, held_out: tuple[str, ...] = ()) -> TransformersExport:
    """Convert the extended ``.model`` to a ``tokenizer.json`` and probe it: on the ``held_out`` texts (text the
    extension was not learned on, e.g. the fold's own items) against ``sentencepiece`` loading the ``.model`` (the
    artifact of record); without them, on every training text against the learner's segmentation."""
    model = sentencepiece_model(ext)
    text = hf_tokenizer_json(model)
    hf = Tokenizer.from_str(text)
    if held_out:
        texts = list(held_out)
        want = [tuple(x) for x in processor(model).encode(texts)]
    else:
        texts = list(ext.segmentation)
        want = [ext.segmentation[t] for t in texts]
    got = [tuple(ids) for ids in encode_texts(hf, texts, fast=False)]
    differing = sum(g != w for g, w in zip(got, want, strict=True))
    where = "held-out" if held_out else "training"
    return TransformersExport(text if differing == 0 else None, len(texts), differing, where)


def check_extended_pieces(tok: ResolvedTokenizer, model: SentencePieceBackend, *, ext: Extension) -> None:
    """Raise unless every base piece keeps its id and bytes, new pieces sit where planned, and the model (``tok``,
    whose back end is ``model``) segments every training text exactly as the learner did."""
    base_bytes = ext.base.token_bytes
    got = tok.token_bytes
    if len(got) != ext.first_new_id + ext.n_new_tokens:
        raise DamagedDataError(f"extended model has {len(got)} pieces, expected {ext.first_new_id + ext.n_new_tokens}")
    moved = [i for i, b in enumerate(base_bytes) if got[i] != b]
    if moved:
        raise DamagedDataError(f"extended model changed {len(moved)} base pieces (e.g. id {moved[0]})")
    if tok.special_ids != ext.base.special_ids:
        raise DamagedDataError("extended model changed the control and unknown ids")
    for k, s in enumerate(ext.new_tokens):
        if model.id_to_piece(ext.first_new_id + k) != s:
            raise DamagedDataError(f"new piece {s!r} is not at id {ext.first_new_id + k}")
    texts = list(ext.segmentation)
    differ = sum(tuple(a) != ext.segmentation[t] for t, a in zip(texts, tok.encode_batch(texts), strict=True))
    if differ:
        raise DamagedDataError(f"extended model segments {differ} training texts unlike the learner (a bug)")


def check_extended(tok: Tokenizer, base: Tokenizer, *, ext: Extension) -> None:
    """Raise unless every token of ``base`` (added and special included) keeps its id and new tokens sit where
    planned."""
    base_vocab = base.get_vocab(with_added_tokens=True)
    got = tok.get_vocab(with_added_tokens=True)
    moved = [(s, i, got.get(s)) for s, i in base_vocab.items() if got.get(s) != i]
    if moved:
        s, i, j = moved[0]
        raise DamagedDataError(f"extended tokenizer moved {len(moved)} base tokens (e.g. {s!r}: {i} -> {j})")
    for i, added in base.get_added_tokens_decoder().items():
        if tok.token_to_id(added.content) != i or tok.id_to_token(i) != added.content:
            raise DamagedDataError(f"extended tokenizer lost added token {added.content!r} (id {i})")
    for k, token in enumerate(ext.new_tokens):
        found = got.get(token)  # type: ignore[call-overload]  # a merges extension's new tokens are str
        if found != ext.first_new_id + k:
            raise DamagedDataError(f"new token {token!r} has id {found}, expected {ext.first_new_id + k}")
    expected = ext.first_new_id + ext.n_new_tokens
    size = tok.get_vocab_size(with_added_tokens=True)
    if size != expected:
        raise DamagedDataError(f"extended tokenizer has {size} ids, expected {expected}")


def resolved(ext: Extension, name: str) -> ResolvedTokenizer:
    """The extended tokenizer as a :class:`ResolvedTokenizer` (checked; its ``sha256`` is that of the saved file)."""
    return files_of(ext).resolved(ext, name)


def write_extension(ext: Extension, folder: Path, *, manifest: dict, held_out: tuple[str, ...] = ()) -> dict:
    """Write tokenizer files and ``manifest.json`` into an existing (staging) folder; return the manifest.

    ``held_out``: texts the extension was not learned on, for a SentencePiece extension's ``tokenizer.json`` probe."""
    return files_of(ext).write(ext, folder, manifest=manifest, held_out=held_out)


def transformers_row(ext: Extension, held_out: tuple[str, ...]) -> dict:
    """A cross-fit summary row's word on ``transformers``: whether a SentencePiece extension's ``tokenizer.json``
    was written (its probe on the ``held_out`` texts passed); nothing for families whose files load there as
    they are."""
    return files_of(ext).transformers_row(ext, held_out)


class ExtensionFiles(Protocol):
    """What saving differs in by family: the extended tokenizer built, written, checked and described."""

    def resolved(self, ext: Extension, name: str) -> ResolvedTokenizer:
        """The extended tokenizer in memory, checked against the base."""

    def write(self, ext: Extension, folder: Path, *, manifest: dict, held_out: tuple[str, ...]) -> dict:
        """Write the tokenizer files and ``manifest.json`` into ``folder``, reload and check them; the manifest."""

    def base_record(self, ext: Extension) -> tuple[int, bool, dict, dict]:
        """The base's merge count and ``ignore_merges``, extra base fields, extra manifest fields."""

    def transformers_row(self, ext: Extension, held_out: tuple[str, ...]) -> dict:
        """The fields a cross-fit summary row gives about loading the extension in ``transformers``."""

    def model(self, ext: Extension) -> bytes:
        """The serialised extended model file, where the family has one file that holds it all."""


class MergesFiles:
    """A ``tokenizer.json`` with new merges appended (``tokenizer_config.json`` copied or written beside it)."""

    def __init__(self, backend: HFBackend) -> None:
        self.base = backend.hf

    def resolved(self, ext: Extension, name: str) -> ResolvedTokenizer:
        check_extended(ext.tokenizer, self.base, ext=ext)
        return ResolvedTokenizer(name=name, tokenizer=ext.tokenizer, source=f"extension of {ext.base.name}")

    def write(self, ext: Extension, folder: Path, *, manifest: dict, held_out: tuple[str, ...]) -> dict:
        text = ext.tokenizer.to_str()  # tokenizers' own serialisation, so the file hash equals ResolvedTokenizer.sha256
        (folder / "tokenizer.json").write_text(text, encoding="utf-8")
        base_dir = ext.base.path.parent if ext.base.path is not None else None
        copied = []
        for name in COPIED_FILES:
            if base_dir is not None and (base_dir / name).is_file():
                shutil.copyfile(base_dir / name, folder / name)
                copied.append(name)
        if "tokenizer_config.json" not in copied:
            # a bare tokenizer.json base: the generic fast class reads everything from tokenizer.json
            config = {"tokenizer_class": "PreTrainedTokenizerFast", "clean_up_tokenization_spaces": False}
            (folder / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
        reloaded_json = Tokenizer.from_file(str(folder / "tokenizer.json"))
        check_extended(reloaded_json, self.base, ext=ext)
        full = {**manifest, "tokenizer_sha256": hashlib.sha256(text.encode("utf-8")).hexdigest()}
        (folder / MANIFEST).write_text(dumps_strict(full) + "\n", encoding="utf-8")
        return full

    def base_record(self, ext: Extension) -> tuple[int, bool, dict, dict]:
        info = base_bpe(ext.base)
        return len(info.merges), info.ignore_merges, {}, {}

    def transformers_row(self, ext: Extension, held_out: tuple[str, ...]) -> dict:
        return {}

    def model(self, ext: Extension) -> bytes:
        raise BadInputError(f"{ext.base.name}: a tokenizer.json extension has no single model file; save it instead")


class RanksFiles:
    """A ``.tiktoken`` rank file with new ranks appended, and its ``encoding.json`` (both read from the base's
    files)."""

    def resolved(self, ext: Extension, name: str) -> ResolvedTokenizer:
        files = tiktoken_extension_files(ext)
        info = base_tiktoken(ext.base)
        backend = build_tiktoken(
            files.spec["name"], info.pat_str, ranks=files.ranks, specials=info.specials, where=f"extension of {name}"
        )
        tok = ResolvedTokenizer(name, source=f"extension of {ext.base.name}", backend=backend, sha256=files.sha256)
        check_extended_tiktoken(tok, ext)
        return tok

    def write(self, ext: Extension, folder: Path, *, manifest: dict, held_out: tuple[str, ...]) -> dict:
        files = tiktoken_extension_files(ext)
        (folder / files.rank_name).write_bytes(files.rank_data)
        (folder / "encoding.json").write_bytes(files.spec_data)
        backend, digest = load_tiktoken(folder / files.rank_name)
        reloaded = ResolvedTokenizer(folder.name, backend=backend, sha256=digest)
        check_extended_tiktoken(reloaded, ext)
        if digest != files.sha256:
            raise StorageError(f"{folder}: the written tiktoken files do not hash as built (disk error?)")
        full = {**manifest, "tokenizer_sha256": digest}
        (folder / MANIFEST).write_text(dumps_strict(full) + "\n", encoding="utf-8")
        return full

    def base_record(self, ext: Extension) -> tuple[int, bool, dict, dict]:
        # every rank longer than one byte is a merge; a piece that is a token is emitted whole (ignore_merges)
        return base_tiktoken(ext.base).n_merges, True, {"family": ext.family}, {}

    def transformers_row(self, ext: Extension, held_out: tuple[str, ...]) -> dict:
        return {}

    def model(self, ext: Extension) -> bytes:
        raise BadInputError(f"{ext.base.name}: a tiktoken extension is two files (ranks and encoding.json)")


class PiecesFiles:
    """A SentencePiece ``.model`` with new pieces appended, and a probed ``tokenizer.json`` for transformers."""

    def __init__(self, backend: SentencePieceBackend) -> None:
        self.backend = backend

    def _pieces(self, ext: Extension) -> PieceExtension:
        pieces = ext.pieces
        if pieces is None:
            raise BadInputError(f"an extension of the SentencePiece model {ext.base.name} lacks its pieces")
        return pieces

    def model(self, ext: Extension) -> bytes:
        return extended_model(self.backend, self._pieces(ext))

    def resolved(self, ext: Extension, name: str) -> ResolvedTokenizer:
        data = sentencepiece_model(ext)
        digest = hashlib.sha256(data).hexdigest()
        backend = SentencePieceBackend(processor(data))
        tok = ResolvedTokenizer(name, source=f"extension of {ext.base.name}", backend=backend, sha256=digest)
        check_extended_pieces(tok, backend, ext=ext)
        return tok

    def write(self, ext: Extension, folder: Path, *, manifest: dict, held_out: tuple[str, ...]) -> dict:
        """Write the extended ``tokenizer.model`` and ``manifest.json``; the model is reloaded from disk and
        checked."""
        data = sentencepiece_model(ext)
        (folder / SP_MODEL).write_bytes(data)
        backend, digest = load_sentencepiece(folder / SP_MODEL)
        check_extended_pieces(ResolvedTokenizer(folder.name, backend=backend, sha256=digest), backend, ext=ext)
        if digest != hashlib.sha256(data).hexdigest():
            raise StorageError(f"{folder}: the written model does not hash as built (disk error?)")
        export = transformers_export(ext, held_out)
        if export.text is not None:
            (folder / HF_FOLDER).mkdir()
            (folder / HF_FOLDER / "tokenizer.json").write_text(export.text, encoding="utf-8")
            config = {"tokenizer_class": "PreTrainedTokenizerFast", "clean_up_tokenization_spaces": False}
            (folder / HF_FOLDER / "tokenizer_config.json").write_text(
                json.dumps(config, indent=2) + "\n", encoding="utf-8"
            )
        full = {**manifest, "tokenizer_sha256": digest, "transformers": export.as_dict()}
        (folder / MANIFEST).write_text(dumps_strict(full) + "\n", encoding="utf-8")
        return full

    def base_record(self, ext: Extension) -> tuple[int, bool, dict, dict]:
        # no merge list; base pieces merge by score, every one before any new piece
        return 0, False, {"family": ext.family}, {"sentencepiece": self._pieces(ext).as_dict()}

    def transformers_row(self, ext: Extension, held_out: tuple[str, ...]) -> dict:
        # is there a tokenizer.json for transformers?
        return {"transformers_tokenizer_json": transformers_export(ext, held_out).text is not None}


class _Families(ExtensionFamilies[ExtensionFiles]):
    """Each family's :class:`ExtensionFiles`."""

    def merges(self, backend: HFBackend) -> ExtensionFiles:
        return MergesFiles(backend)

    def ranks(self, backend: TiktokenBackend) -> ExtensionFiles:
        return RanksFiles()

    def pieces(self, backend: SentencePieceBackend) -> ExtensionFiles:
        return PiecesFiles(backend)


_FAMILIES = _Families()


def files_of(ext: Extension) -> ExtensionFiles:
    """How ``ext``'s family builds, writes, checks and describes its tokenizer files."""
    files = ext.base.extension(_FAMILIES)
    if files is None:
        raise BadInputError(f"{ext.base.name} is a {ext.base.family} tokenizer, which cannot be extended")
    return files


def save_extension(
    ext: Extension,
    out_dir: str | os.PathLike[str],
    *,
    manifest: dict | None = None,
    lang: str | None = None,
    held_out: Sequence[str] = (),
) -> Path:
    """Save one extension to a new folder ``out_dir`` (atomically), with ``manifest`` plus the learning record.

    ``lang`` (the language the merges were learned for) is recorded so that pricing can refuse another one;
    ``held_out``: texts it was not learned on, which a SentencePiece extension's ``tokenizer.json`` is probed on
    (none: its training texts).
    """
    extra = {"lang": resolve_language(lang)} if lang is not None else {}
    with new_folder(out_dir, PRODUCER) as tmp:
        record = {**extension_record(ext), **extra, **(manifest or {})}
        write_extension(ext, tmp, manifest=record, held_out=tuple(held_out))
    return Path(out_dir)


def extension_language(manifest: dict) -> str | None:
    """The FLORES code an extension was learned for: the manifest's ``lang``, else its measured effect's."""
    lang = manifest.get("lang") or (manifest.get("effect") or {}).get("lang")
    return resolve_language(lang) if lang else None


def extension_record(ext: Extension) -> dict:
    """The manifest fields an extension knows by itself (base, corpus, rule, sizes, learning time).

    tiktoken bases: ``merges`` counts the ranks longer than one byte, ``ignore_merges`` is true (a piece that is
    a token is emitted whole) and ``family`` is recorded.
    """
    n_merges, ignore, family, extra = files_of(ext).base_record(ext)
    return {
        "format": FORMAT,
        "base": {
            "name": ext.base.name,
            "sha256": ext.base.sha256,
            "source": ext.base.source,
            "vocab_size": ext.first_new_id,
            "merges": n_merges,
            "ignore_merges": ignore,
            **family,
        },
        "corpus": ext.corpus,
        "size_rule": ext.size_rule.as_dict(),
        "merges": ext.n_merges,
        "new_tokens": ext.n_new_tokens,
        "reused_tokens": ext.n_merges - ext.n_new_tokens,
        "first_new_id": ext.first_new_id,
        "vocab_size": ext.first_new_id + ext.n_new_tokens,
        "last_merge_count": ext.merge_counts[-1] if ext.merge_counts else None,
        "training_tokens_before": ext.tokens_before,
        "training_tokens_after": ext.tokens_after,
        "seconds": round(ext.seconds, 3),
        **extra,
    }


@dataclass(frozen=True, eq=False)
class SavedExtension:
    """A saved extension folder: its tokenizer, manifest and fold membership."""

    path: Path
    manifest: dict
    tokenizer: ResolvedTokenizer

    @property
    def held_out(self) -> tuple[ItemId, ...]:
        """Items this extension never saw (evaluate these with it)."""
        return tuple(self.manifest.get("held_out_items", ()))

    @property
    def training(self) -> tuple[ItemId, ...]:
        """Items whose text the merges were learned on."""
        return tuple(self.manifest.get("training_items", ()))

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` under the extended tokenizer (no special tokens added)."""
        return self.tokenizer.encode(text)

    def retokenize(self, base_ids: Sequence[int]) -> list[int]:
        """Re-encode the text that base token ids decode to (special tokens kept as text) with the extension.

        Every base id decodes to the same bytes under the extended tokenizer, so no base tokenizer is needed.
        """
        return self.encode(self.tokenizer.decode(list(base_ids)))


#: the corpus names of a fold learned on FLORES (``flores200/<split>/<code>``), whose lines can be read back
FLORES_PREFIX = "flores200/"


def fold_flores_corpus(ext: SavedExtension, *, source: str | None = None) -> Corpus:
    """The FLORES split a fold was cut from, checked against its manifest's hash; a fold learned on another corpus
    is refused in one line (only FLORES text can be read back by name)."""
    corpus = ext.manifest.get("corpus") or {}
    name = str(corpus.get("name", ""))
    parts = name.removeprefix(FLORES_PREFIX).split("/")
    if not name.startswith(FLORES_PREFIX) or len(parts) != 2:
        raise BadInputError(
            f"{ext.path} was learned on {name or 'an unnamed corpus'!r}: its lines are read back only for a fold "
            "learned on FLORES (mindcap-tok extend --corpus flores-dev)"
        )
    split, code = parts
    target = flores_corpus(code, split, source=source)
    if target.sha256 != corpus.get("sha256"):
        raise DamagedDataError(f"the FLORES {split} text of {code} here differs from the one {ext.path} was cut from")
    return target


def fold_lines(ext: SavedExtension, corpus: Corpus, *, ids: Sequence[ItemId]) -> list[str]:
    """The texts of items ``ids`` of ``corpus``, in that order (a missing item: damaged fold)."""
    by_id = dict(corpus.items)
    missing = [i for i in ids if i not in by_id]
    if missing:
        raise DamagedDataError(f"{ext.path}: item {missing[0]!r} is not a line of {corpus.name}")
    return [by_id[i] for i in ids]


def load_extension(folder: str | os.PathLike[str]) -> SavedExtension:
    """Load a saved extension folder and check its tokenizer files against the manifest's hash."""
    path = Path(folder)
    try:
        manifest = json.loads(regular_file(path / MANIFEST, "extension manifest").read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        folds = sorted(str(p) for p in path.glob(f"*/{MANIFEST}")) if path.is_dir() else []
        hint = f": it holds the folds {', '.join(str(Path(f).parent) for f in folds)}; give one" if folds else ""
        raise BadInputError(f"{path} is not a saved extension (no {MANIFEST}){hint}") from exc
    except ValueError as exc:
        raise DamagedDataError(f"{path / MANIFEST} is not valid JSON: {exc}") from exc
    if manifest.get("format") != FORMAT:
        raise DamagedDataError(f"{path / MANIFEST}: unknown format {manifest.get('format')!r} (expected {FORMAT})")
    name = manifest.get("name") or path.name
    tok = load_tokenizer(str(path))
    tok = ResolvedTokenizer(name, source=tok.source, path=tok.path, backend=tok.backend, sha256=tok.sha256)
    if tok.sha256 != manifest.get("tokenizer_sha256"):
        files = tok.path.name if tok.path is not None else "tokenizer files"
        raise DamagedDataError(f"{path / files} does not match its manifest (sha256 differs): edited?")
    return SavedExtension(path, manifest, tok)


@dataclass(frozen=True, eq=False)
class CrossFitSet:
    """The folds of a saved cross-fit (each fold's extension never learned from its held-out items)."""

    path: Path
    summary: dict
    folds: tuple[SavedExtension, ...]


def load_crossfit(folder: str | os.PathLike[str]) -> CrossFitSet:
    """Load a cross-fit output folder written by ``mindcap-tok extend`` (``fold-<k>`` folders + summary)."""
    path = Path(folder)
    try:
        summary = json.loads(regular_file(path / SUMMARY, "cross-fit summary").read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise BadInputError(f"{path} is not a cross-fit output folder (no {SUMMARY})") from exc
    folds = tuple(load_extension(path / f"fold-{k}") for k in range(int(summary["folds"])))
    return CrossFitSet(path, summary, folds)


def apply_extension(extension: SavedExtension | str | os.PathLike[str], text_or_ids: str | Sequence[int]) -> list[int]:
    """Extended token ids of a text, or of a list of base token ids (decoded, then re-encoded)."""
    ext = extension if isinstance(extension, SavedExtension) else load_extension(extension)
    return ext.encode(text_or_ids) if isinstance(text_or_ids, str) else ext.retokenize(text_or_ids)
