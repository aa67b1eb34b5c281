"""From an extension to a model: a ``transformers`` checkpoint whose tokenizer is a saved fold's extended tokenizer
and whose input embeddings and output layer (tied or untied) are resized to it.

Every base row is kept bit for bit; the rows of the new tokens are initialised by a stated rule (docs/adapt.md):

- ``mean``: FVT (Gee et al. 2022, "Fast Vocabulary Transfer"): the mean of the base rows of the base tokens that
  the new token's bytes encode to (the base BPE's merges applied to those bytes as one pre-token); output rows by
  the same rule over the output layer's rows;
- ``random``: the model's own initialiser (``resize_token_embeddings(mean_resizing=False)``, which calls the
  model's ``_init_weights`` on the new rows), seeded: the control;
- ``hewitt``: Hewitt (2021): every new row drawn from a normal around the mean of all base rows with 1e-9 times
  their covariance (``resize_token_embeddings(mean_resizing=True)``), seeded;
- ``focus``: FOCUS (Dobler & de Melo 2023, :mod:`.focus`): a sparsemax-weighted sum of the base rows of the base
  tokens most similar in fastText embeddings trained on the fold's training text; FVT where a new token has none.

Byte-level BPE ``tokenizer.json`` models and SentencePiece ``.model`` ones are adapted (the back end says whether
it can be, so no family is named here): a SentencePiece fold brings its probed ``transformers/tokenizer.json`` and
its ``.model``, and a new piece's base encoding is the base model's segmentation of the piece's text as one unit.
A model whose tokenizer is not the fold's base (file hashes differ) is refused.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._io import check_new_folder, new_folder, regular_file
from .._json import dumps_strict
from ..choices import ADAPT_INITS
from ..errors import BadInputError, DamagedDataError, MissingExtraError, first_line
from ..tokenization.base import ExtensionFamilies
from ..tokenization.bytelevel import is_byte_level, piece_ids
from ..tokenization.hf import HFBackend
from ..tokenization.load import ResolvedTokenizer, load_tokenizer
from ..tokenization.sentencepiece_family import SentencePieceBackend
from ..tokenization.tiktoken_family import TiktokenBackend
from .focus import FocusWeights, auxiliary_vectors, focus_weights
from .saved import HF_FOLDER, HF_REMEDY, SP_MODEL, SavedExtension, fold_flores_corpus, fold_lines, load_extension

PRODUCER = "mindcap-tok adapt"
#: the adapted folder's record of what was done (beside config.json and the weights)
ADAPT_MANIFEST = "adaptation.json"
ADAPT_FORMAT = "mindcap-tok/adapted/1"
#: a model folder holds its weights in one of these (a sharded checkpoint: its index)
WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)
#: the model folder's tokenizer files other than tokenizer.json, carried over (special tokens, chat template);
#: vocab.json / merges.txt are not: they hold the base vocabulary
TOKENIZER_SIDE_FILES = ("tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja", "chat_template.json")

BasePieces = Callable[[bytes], list[int]]


class _PieceEncoders(ExtensionFamilies[BasePieces | None]):
    """How a base tokenizer encodes a new token's bytes, where ``adapt`` supports its family."""

    def merges(self, backend: HFBackend) -> BasePieces | None:
        hf = backend.hf
        return (lambda data: piece_ids(hf, data)) if is_byte_level(hf) else None

    def ranks(self, backend: TiktokenBackend) -> BasePieces | None:
        return None  # no transformers model loads a .tiktoken vocabulary as it is

    def pieces(self, backend: SentencePieceBackend) -> BasePieces | None:
        return backend.piece_ids


@dataclass(frozen=True)
class CheckpointFiles:
    """Where a family's tokenizer lives: ``model_file`` in a model folder (what the fold's base hash is of: a
    Llama 2 checkpoint ships ``tokenizer.json`` beside ``tokenizer.model``), ``copied`` (file in the fold, file in
    the checkpoint), ``side_dir``, the fold's folder of ``transformers`` side files (used where the model has
    none), and ``specials_from_model``: the fold's ``tokenizer.json`` segments only, so the checkpoint's takes the
    model's special tokens and the way it adds them (BOS) from the model's tokenizer as ``transformers`` loads it."""

    model_file: str
    copied: tuple[tuple[str, str], ...]
    side_dir: str
    specials_from_model: bool = False


class _Checkpoints(ExtensionFamilies[CheckpointFiles | None]):
    def merges(self, backend: HFBackend) -> CheckpointFiles | None:
        return CheckpointFiles("tokenizer.json", (("tokenizer.json", "tokenizer.json"),), "")

    def ranks(self, backend: TiktokenBackend) -> CheckpointFiles | None:
        return None

    def pieces(self, backend: SentencePieceBackend) -> CheckpointFiles | None:
        # transformers reads tokenizer.json first; the .model keeps the slow tokenizer and sentencepiece in step
        copied = ((f"{HF_FOLDER}/tokenizer.json", "tokenizer.json"), (SP_MODEL, SP_MODEL))
        return CheckpointFiles(SP_MODEL, copied, HF_FOLDER, specials_from_model=True)


def checkpoint_files(ext: SavedExtension) -> CheckpointFiles:
    """The fold's :class:`CheckpointFiles`, or a one-line refusal (a family no transformers model loads, or a
    SentencePiece fold without a ``tokenizer.json`` that segments as its ``.model``)."""
    files = ext.tokenizer.extension(_Checkpoints())
    if files is None:
        raise BadInputError(
            f"adapt takes byte-level BPE and SentencePiece extensions; {ext.path} extends a {ext.tokenizer.family} "
            "tokenizer, which no transformers model loads as it is"
        )
    for name, _ in files.copied:
        if not (ext.path / name).is_file():
            raise BadInputError(f"{ext.path} has no {name} for transformers: {HF_REMEDY}")
    return files


def base_pieces_of(base: ResolvedTokenizer) -> BasePieces:
    """The function giving a new token's base encoding, or a one-line refusal for a family ``adapt`` lacks."""
    encoder = base.extension(_PieceEncoders())
    if encoder is None:
        raise BadInputError(
            f"adapt supports byte-level BPE tokenizer.json and SentencePiece models; {base.name} is a {base.family} "
            "tokenizer that is neither"
        )
    return encoder


def check_model_folder(model: str | os.PathLike[str]) -> Path:
    """Refuse a model folder without ``config.json`` or weights, in one line; return it."""
    path = Path(model)
    if not path.is_dir():
        raise BadInputError(f"model folder {path} does not exist (give a transformers checkpoint folder)")
    if not (path / "config.json").is_file():
        raise BadInputError(f"model folder {path} has no config.json (not a transformers checkpoint)")
    if not any((path / name).is_file() for name in WEIGHT_FILES):
        raise BadInputError(f"model folder {path} has no weights ({', '.join(WEIGHT_FILES)})")
    return path


def check_same_base(ext: SavedExtension, model_tok: ResolvedTokenizer, *, model: Path) -> None:
    """Refuse a model whose tokenizer file (``model``) does not hash as the fold's base tokenizer's."""
    want = (ext.manifest.get("base") or {}).get("sha256")
    if model_tok.sha256 != want:
        raise BadInputError(
            f"the tokenizer of {model.parent} ({model.name}, sha256 {model_tok.sha256[:12]}…) is not the base of the "
            f"extension {ext.path} (sha256 {str(want)[:12]}…): extend this model's own tokenizer (mindcap-tok extend "
            f"--model {model})"
        )


def new_token_pieces(ext: SavedExtension, base: ResolvedTokenizer) -> list[list[int]]:
    """Each new token's base encoding (base ids its bytes encode to), in new-id order."""
    encode = base_pieces_of(base)
    first = int(ext.manifest["first_new_id"])
    out = []
    for i in range(first, ext.tokenizer.vocab_size):
        ids = encode(ext.tokenizer.token_bytes[i])
        if not ids or max(ids) >= first:
            raise DamagedDataError(f"new token {i} of {ext.path} does not encode to base tokens ({ids})")
        out.append(ids)
    return out


def _torch():
    try:
        import torch
        from transformers import AutoModelForCausalLM
    except ImportError as exc:
        raise MissingExtraError(exc.name or "torch", "torch", needed_by="adapt") from exc
    return torch, AutoModelForCausalLM


def _mean_rows(torch, weight, pieces: list[list[int]]):
    """Rows: the mean of ``weight``'s rows over each list of ids (in float64, rounded once to the weight's dtype)."""
    flat = torch.tensor([i for ids in pieces for i in ids], dtype=torch.long)
    offsets = torch.tensor([0, *torch.tensor([len(p) for p in pieces]).cumsum(0)[:-1].tolist()], dtype=torch.long)
    used = weight.detach().to(torch.float64)
    return torch.nn.functional.embedding_bag(flat, used, offsets, mode="mean").to(weight.dtype)


def _weighted_rows(torch, weight, pieces: list[list[int]], weights: list[list[float]]):
    """Rows: the ``weights``-weighted sum of ``weight``'s rows over each list of ids (float64, rounded once)."""
    flat = torch.tensor([i for ids in pieces for i in ids], dtype=torch.long)
    per = torch.tensor([w for ws in weights for w in ws], dtype=torch.float64)
    offsets = torch.tensor([0, *torch.tensor([len(p) for p in pieces]).cumsum(0)[:-1].tolist()], dtype=torch.long)
    used = weight.detach().to(torch.float64)
    rows = torch.nn.functional.embedding_bag(flat, used, offsets, mode="sum", per_sample_weights=per)
    return rows.to(weight.dtype)


def initialise(
    model,
    pieces: list[list[int]],
    *,
    first_new_id: int,
    init: str,
    seed: int,
    weights: list[list[float]] | None = None,
) -> bool:
    """Resize ``model``'s embeddings (and output layer) by ``len(pieces)`` rows and set the new rows by ``init``
    (``mean`` and ``focus``: each new row the mean of its ``pieces``' base rows, or their ``weights``-weighted sum
    where weights are given); whether input and output share one matrix (tied)."""
    torch, _ = _torch()

    def rows(matrix):
        if weights is None:
            return _mean_rows(torch, matrix, pieces)
        return _weighted_rows(torch, matrix, pieces, weights)

    new_size = first_new_id + len(pieces)
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        torch.manual_seed(seed)
        # the model's own initialiser on new rows, or (hewitt) transformers' draw around the mean of all base rows
        model.resize_token_embeddings(new_size, mean_resizing=init == "hewitt")
        inp = model.get_input_embeddings().weight
        out_layer = model.get_output_embeddings()
        tied = out_layer is None or out_layer.weight is inp
        if init in ("mean", "focus") and pieces:
            inp[first_new_id:] = rows(inp[:first_new_id])
            if not tied:
                out_layer.weight[first_new_id:] = rows(out_layer.weight[:first_new_id])
            bias = None if out_layer is None else getattr(out_layer, "bias", None)
            if bias is not None:
                bias[first_new_id:] = rows(bias[:first_new_id, None])[:, 0]
    return tied


def fold_focus(ext: SavedExtension, *, source: str | None = None) -> tuple[FocusWeights, int]:
    """FOCUS weights of the fold's new tokens, from fastText vectors trained on its training lines (never its
    held-out ones) encoded by the extended tokenizer; and how many lines that was. FLORES folds only."""
    corpus = fold_flores_corpus(ext, source=source)
    texts = fold_lines(ext, corpus, ids=list(ext.training))
    vectors = auxiliary_vectors(ext.tokenizer.encode_batch(texts))
    first = int(ext.manifest["first_new_id"])
    return focus_weights(vectors, first_new_id=first, vocab_size=ext.tokenizer.vocab_size), len(texts)


def _copy_tokenizer(ext: SavedExtension, files: CheckpointFiles, model: Path, folder: Path) -> list[str]:
    """The fold's tokenizer files and the model's other tokenizer files (the fold's where the model has none)."""
    copied = []
    for name in TOKENIZER_SIDE_FILES:
        source = model / name if (model / name).is_file() else ext.path / files.side_dir / name
        if source.is_file():
            shutil.copyfile(regular_file(source, "tokenizer file"), folder / name)
            copied.append(name)
    for name, target in files.copied:
        shutil.copyfile(regular_file(ext.path / name, "tokenizer file"), folder / target)
    if files.specials_from_model:
        _take_model_specials(model, folder / "tokenizer.json")
        _check_segments_as_fold(ext, folder)
    return [target for _, target in files.copied] + copied


def _hf_tokenizer(folder: Path) -> Any:
    """``AutoTokenizer.from_pretrained(folder)``, or a one-line error naming the folder."""
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(folder)
    except Exception as exc:  # transformers raises many kinds (OSError, ValueError, ImportError, KeyError)
        raise BadInputError(f"transformers cannot load the tokenizer in {folder}: {first_line(exc)}") from exc


def _take_model_specials(model: Path, tokenizer_json: Path) -> None:
    """Give ``tokenizer_json`` the model's post-processor and added tokens, from its tokenizer as ``transformers``
    loads it (converted from the ``.model`` when the folder has no ``tokenizer.json``)."""
    own = json.loads(_hf_tokenizer(model).backend_tokenizer.to_str())
    data = json.loads(tokenizer_json.read_text("utf-8"))
    data["post_processor"] = own.get("post_processor")
    ids = {t["id"] for t in own.get("added_tokens") or []}
    data["added_tokens"] = sorted(
        [*(own.get("added_tokens") or []), *(t for t in data.get("added_tokens") or [] if t["id"] not in ids)],
        key=lambda t: t["id"],
    )
    tokenizer_json.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")


def _check_segments_as_fold(ext: SavedExtension, folder: Path) -> None:
    """Refuse a checkpoint whose tokenizer, as ``transformers`` loads it with the model's settings, segments the new
    pieces and an English line otherwise than the fold's tokenizer."""
    first = int(ext.manifest["first_new_id"])
    pieces = [ext.tokenizer.token_bytes[i].decode("utf-8", "replace") for i in range(first, ext.tokenizer.vocab_size)]
    probes = ["".join(pieces).strip(), " ".join(pieces).strip(), "The quick brown fox, 1,024 times."]
    loaded = _hf_tokenizer(folder)
    for text in probes:
        got, want = loaded(text, add_special_tokens=False)["input_ids"], ext.tokenizer.encode(text)
        if got != want:
            raise BadInputError(
                f"transformers loads the adapted tokenizer with {folder.name}'s settings so that it segments "
                f"{text[:40]!r} otherwise than {ext.path} ({got[:8]} vs {want[:8]}): the model folder's "
                "tokenizer_config.json changes how the tokenizer.json is read"
            )


def adapt_model(
    extension: str | os.PathLike[str] | SavedExtension,
    model: str | os.PathLike[str],
    *,
    out_dir: str | os.PathLike[str],
    init: str = "mean",
    seed: int = 0,
    flores_source: str | None = None,
) -> dict:
    """Write a checkpoint of ``model`` adapted to the saved fold ``extension`` into the new folder ``out_dir``
    (written beside it and renamed: a kill leaves no half-written checkpoint); return its record
    (``adaptation.json``: sizes, init, seed, hashes, seconds). ``focus`` reads the fold's training lines from
    FLORES at ``flores_source`` (default: the configured place).

    Refused in one line, before anything is written: an unknown ``init``, an existing ``out_dir``, a model folder
    without ``config.json`` or weights, a model whose tokenizer is not the fold's base, a family ``adapt`` lacks.
    """
    if init not in ADAPT_INITS:
        raise BadInputError(f"unknown init {init!r}: use one of {', '.join(ADAPT_INITS)}")
    target = check_new_folder(out_dir)
    ext = extension if isinstance(extension, SavedExtension) else load_extension(extension)
    files = checkpoint_files(ext)
    path = check_model_folder(model)
    if not (path / files.model_file).is_file():
        raise BadInputError(f"model folder {path} has no {files.model_file}, the kind of tokenizer {ext.path} extends")
    base = load_tokenizer(str(path / files.model_file))
    check_same_base(ext, base, model=path / files.model_file)
    first = int(ext.manifest["first_new_id"])
    pieces = new_token_pieces(ext, base)
    mean_pieces = (sum(map(len, pieces)) / len(pieces)) if pieces else None
    weights, focus_record, focus_s = None, None, 0.0
    if init == "focus":
        start = time.perf_counter()
        focus, n_lines = fold_focus(ext, source=flores_source)
        # a new token without an auxiliary vector keeps FVT's rule: equal weights over its base encoding
        combos = [focus.combos.get(first + k) for k in range(len(pieces))]
        weights = [c[1] if c else [1 / len(p)] * len(p) for c, p in zip(combos, pieces, strict=True)]
        pieces = [c[0] if c else p for c, p in zip(combos, pieces, strict=True)]
        focus_record = focus.as_dict() | {"training_lines": n_lines}
        focus_s = time.perf_counter() - start
    _, auto_model = _torch()
    start = time.perf_counter()
    loaded = auto_model.from_pretrained(path)
    rows = loaded.get_input_embeddings().weight.shape[0]
    if rows != first:
        raise BadInputError(
            f"{path} has {rows} embedding rows but its tokenizer {first} ids: padded vocabularies are not supported "
            "by adapt yet (new ids would land on unused rows)"
        )
    load_s = time.perf_counter() - start
    start = time.perf_counter()
    tied = initialise(loaded, pieces, first_new_id=first, init=init, seed=seed, weights=weights)
    init_s = time.perf_counter() - start
    start = time.perf_counter()
    record: dict[str, object] = {
        "format": ADAPT_FORMAT,
        "init": init,
        "seed": seed,
        "base_model": str(path),
        "base_tokenizer_sha256": base.sha256,
        "extension": str(ext.path),
        "extension_tokenizer_sha256": ext.tokenizer.sha256,
        "lang": ext.manifest.get("lang"),
        "fold": ext.manifest.get("fold"),
        "first_new_id": first,
        "new_tokens": len(pieces),
        "vocab_size": first + len(pieces),
        "tied": tied,
        "dtype": str(loaded.get_input_embeddings().weight.dtype).removeprefix("torch."),
        "mean_base_pieces": mean_pieces,
    }
    if focus_record is not None:
        record["focus"] = focus_record
    with new_folder(target, PRODUCER) as tmp:
        loaded.save_pretrained(tmp)
        record["tokenizer_files"] = _copy_tokenizer(ext, files, path, tmp)
        save_s = time.perf_counter() - start
        seconds = {"load": round(load_s, 3), "resize_init": round(init_s, 3), "save": round(save_s, 3)}
        if init == "focus":
            seconds["focus_weights"] = round(focus_s, 3)
        record["seconds"] = seconds
        (tmp / ADAPT_MANIFEST).write_text(dumps_strict(record) + "\n", encoding="utf-8")
    return record
