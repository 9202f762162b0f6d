"""A parallel corpus from the HuggingFace hub, read with ``datasets.load_dataset``.

Two layouts of the rows:

- one column per language (``bentrevett/multi30k``: columns ``en``, ``de``);
- a ``translation`` column holding ``{lang: sentence}`` (``IWSLT/iwslt2017``, ``wmt/wmt14``).

Without network the hub is never waited on: with ``HF_HUB_OFFLINE=1`` (or ``HF_DATASETS_OFFLINE=1``)
``datasets`` answers from its cache or fails at once; otherwise a 3-second connection probe runs
first, so an unreachable hub fails in seconds instead of after ~25 s of retries. Either way the
error is one line that points to ``data=files``.
"""

from __future__ import annotations

import os
import socket
from urllib.parse import urlparse

from attnlab.data.corpus import Corpus, make_pairs

PROBE_TIMEOUT_S = 3.0


def _offline_hint(path: str, src_lang: str, tgt_lang: str) -> str:
    return (
        f"use local files instead: data=files data.corpus.train_src=<train.{src_lang}> "
        f"data.corpus.train_tgt=<train.{tgt_lang}> (likewise valid_src/valid_tgt, test_src/test_tgt), "
        f"or run once with network so that '{path}' is cached and then set HF_HUB_OFFLINE=1"
    )


def hub_offline() -> bool:
    """True when ``datasets`` is told to stay off the network (``HF_HUB_OFFLINE``/``HF_DATASETS_OFFLINE``)."""
    import datasets

    return bool(datasets.config.HF_HUB_OFFLINE)


def hub_reachable(timeout: float = PROBE_TIMEOUT_S) -> bool:
    """Whether a TCP connection to the hub endpoint (``HF_ENDPOINT``) opens within ``timeout`` seconds."""
    from huggingface_hub import constants

    url = urlparse(os.environ.get("HF_ENDPOINT") or constants.ENDPOINT)
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((url.hostname, port), timeout=timeout):
            return True
    except OSError:
        return False


def _load_split(path: str, config: str | None, split: str, revision: str | None, hint: str):
    import datasets

    try:
        return datasets.load_dataset(path, config, split=split, revision=revision)
    except (ConnectionError, OSError) as err:
        if isinstance(err, FileNotFoundError) and not hub_offline():
            raise ValueError(f"data.corpus.path: no dataset '{path}' on the hub ({err}); {hint}") from err
        raise ValueError(
            f"cannot load '{path}' from the HuggingFace hub (offline or not cached); {hint}"
        ) from err
    except ValueError as err:
        first = next((ln.strip() for ln in str(err).splitlines() if ln.strip()), "")
        raise ValueError(f"data.corpus: cannot load split '{split}' of '{path}' ({config}): {first}") from err


def load_hub(
    path: str,
    src_lang: str,
    tgt_lang: str,
    config: str | None = None,
    revision: str | None = None,
    splits: dict[str, str] | None = None,
    max_train_pairs: int | None = None,
    name: str | None = None,
) -> Corpus:
    """Loads train / valid / test of a hub dataset as a ``Corpus``.

    Args:
        path: hub name, e.g. ``bentrevett/multi30k``.
        src_lang, tgt_lang: language codes (``data.src_lang``, ``data.tgt_lang``): column names, or keys
            of the ``translation`` column.
        config: the dataset's configuration (``iwslt2017-en-de``, ``de-en``), if it has several.
        revision: git revision on the hub, e.g. ``refs/convert/parquet`` for a dataset whose main branch
            holds only a loading script (``datasets`` >= 4 runs no scripts).
        splits: our split name -> the dataset's (default ``train``/``validation``/``test``).
        max_train_pairs: read only the first N training pairs (null = all).
        name: the corpus name (default: ``path``).
    """
    if max_train_pairs is not None and max_train_pairs <= 0:
        raise ValueError(f"data.corpus.max_train_pairs must be positive or null, got {max_train_pairs}")
    splits = dict(splits or {"train": "train", "valid": "validation", "test": "test"})
    hint = _offline_hint(path, src_lang, tgt_lang)
    if not hub_offline() and not hub_reachable():
        raise ValueError(f"cannot reach the HuggingFace hub to load '{path}' (no network?); {hint}")
    out = {}
    for ours, theirs in splits.items():
        split = theirs if ours != "train" or max_train_pairs is None else f"{theirs}[:{max_train_pairs}]"
        table = _load_split(path, config, split, revision, hint)
        columns = table.column_names
        if src_lang in columns or tgt_lang in columns or "translation" not in columns:
            found = sorted(columns)
            sides = [list(table[lang]) if lang in columns else None for lang in (src_lang, tgt_lang)]
        else:
            rows = list(table["translation"])
            found = sorted({k for row in rows[:100] for k in (row or {})})
            sides = [[(row or {}).get(lang) for row in rows] for lang in (src_lang, tgt_lang)]
        for key, lang, side in zip(("src_lang", "tgt_lang"), (src_lang, tgt_lang), sides):
            if side is None or all(s is None for s in side):
                raise ValueError(
                    f"data.{key} '{lang}' is not a language of '{path}' ({config}); "
                    f"it has: {', '.join(found)}"
                )
        out[ours] = make_pairs(sides[0], sides[1], f"'{path}' split '{theirs}'", what="rows")
    return Corpus(name=name or path, splits=out, src_lang=src_lang, tgt_lang=tgt_lang)
