"""Segment-level COMET from a local checkpoint (extra ``comet``, its own environment: its pins conflict with
vLLM's)."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from ..errors import BadInputError, MissingExtraError


def comet_scores(
    sources: Sequence[str],
    hypotheses: Sequence[str],
    *,
    references: Sequence[str],
    checkpoint: str | os.PathLike[str],
    batch_size: int = 16,
) -> np.ndarray:
    """Segment-level COMET scores from a local checkpoint, on CPU.

    ``checkpoint`` is the ``.ckpt`` in COMET's layout, ``<dir>/checkpoints/model.ckpt``, with its ``hparams.yaml``
    in ``<dir>`` (the parent of ``checkpoints/``), not beside the ``.ckpt``.
    """
    try:
        from comet import load_from_checkpoint
    except ImportError as exc:
        raise MissingExtraError("unbabel-comet", "comet") from exc
    if not os.path.isfile(checkpoint):
        raise BadInputError(f"COMET checkpoint {checkpoint} does not exist")
    model = load_from_checkpoint(str(checkpoint))
    data = [{"src": s, "mt": h, "ref": r} for s, h, r in zip(sources, hypotheses, references, strict=True)]
    out = model.predict(data, batch_size=batch_size, gpus=0, progress_bar=False)
    return np.asarray(out.scores, dtype=np.float64)
