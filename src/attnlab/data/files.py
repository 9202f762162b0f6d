"""A parallel corpus from local files, read with ``datasets.load_dataset`` ("text" and "json" builders).

Two layouts, chosen per split by the keys that are set (``data=files``):

- plain parallel text: ``data.corpus.train_src=train.en data.corpus.train_tgt=train.de`` (and
  ``valid_src``/``valid_tgt``, ``test_src``/``test_tgt``); one sentence per line, line N of the
  source file translates line N of the target file;
- jsonl: ``data.corpus.train=train.jsonl`` (and ``valid``, ``test``); one object per line keyed by
  the language codes ``data.src_lang``/``data.tgt_lang``, e.g. ``{"en": "A dog.", "de": "Ein Hund."}``,
  or the hub's layout ``{"translation": {"en": "A dog.", "de": "Ein Hund."}}``.

Sentences are stripped and their whitespace collapsed (``attnlab.data.corpus.clean``).
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

from attnlab.data.corpus import Corpus, Pair, make_pairs

SPLITS = ("train", "valid", "test")


@contextmanager
def _quiet_datasets():
    """No progress bars or info logs from ``datasets`` while reading small local files."""
    from datasets import utils
    from datasets.utils import logging as ds_logging

    bars_were_off, level = utils.are_progress_bars_disabled(), ds_logging.get_verbosity()
    utils.disable_progress_bars()
    ds_logging.set_verbosity_error()
    try:
        yield
    finally:
        ds_logging.set_verbosity(level)
        if not bars_were_off:
            utils.enable_progress_bars()


def _existing(key: str, path: str) -> Path:
    from hydra.utils import to_absolute_path

    resolved = Path(to_absolute_path(str(Path(path).expanduser())))
    if not resolved.is_file():
        raise ValueError(f"data.corpus.{key}: no such file: {resolved}")
    return resolved


def _load(builder: str, key: str, path: Path):
    import datasets

    with _quiet_datasets():
        try:
            return datasets.load_dataset(builder, data_files=str(path), split="train")
        except Exception as err:  # noqa: BLE001 - any reader failure becomes one line naming the file
            first = next((ln.strip() for ln in str(err).splitlines() if ln.strip()), type(err).__name__)
            raise ValueError(f"data.corpus.{key} ({path}): cannot read it as {builder}: {first}") from err


def _text_lines(key: str, path: Path) -> list[str]:
    return list(_load("text", key, path)["text"])


def _jsonl_sides(key: str, path: Path, src_lang: str, tgt_lang: str) -> tuple[list, list]:
    table = _load("json", key, path)
    columns = table.column_names
    if "translation" in columns and src_lang not in columns:
        rows = list(table["translation"])
        found = sorted({k for row in rows[:100] for k in (row or {})})
        sides = [[(row or {}).get(lang) for row in rows] for lang in (src_lang, tgt_lang)]
    else:
        found = sorted(columns)
        sides = [list(table[lang]) if lang in columns else None for lang in (src_lang, tgt_lang)]
    for lang_key, lang, side in zip(("src_lang", "tgt_lang"), (src_lang, tgt_lang), sides):
        if side is None or all(s is None for s in side):
            raise ValueError(
                f"data.{lang_key} '{lang}' is not a key of data.corpus.{key} ({path}); "
                f"it has: {', '.join(found)}"
            )
    return sides[0], sides[1]


def _split_pairs(split: str, files: dict[str, str | None], src_lang: str, tgt_lang: str) -> list[Pair]:
    src_key, tgt_key = f"{split}_src", f"{split}_tgt"
    if files.get(split) and (files.get(src_key) or files.get(tgt_key)):
        raise ValueError(
            f"data.corpus: set either {split} (jsonl) or {src_key}/{tgt_key} (plain text), not both"
        )
    if files.get(split):
        path = _existing(split, files[split])
        src, tgt = _jsonl_sides(split, path, src_lang, tgt_lang)
        return make_pairs(src, tgt, f"data.corpus.{split} ({path})", what="rows")
    if not (files.get(src_key) and files.get(tgt_key)):
        raise ValueError(
            f"data=files needs the {split} split: set data.corpus.{src_key}=<{src_lang} file> and "
            f"data.corpus.{tgt_key}=<{tgt_lang} file> (plain text, one sentence per line) or "
            f'data.corpus.{split}=<file.jsonl> (one {{"{src_lang}": ..., "{tgt_lang}": ...}} per line)'
        )
    src_path, tgt_path = _existing(src_key, files[src_key]), _existing(tgt_key, files[tgt_key])
    src, tgt = _text_lines(src_key, src_path), _text_lines(tgt_key, tgt_path)
    if len(src) != len(tgt):
        raise ValueError(
            f"data.corpus.{src_key} ({src_path}) has {len(src)} lines but data.corpus.{tgt_key} "
            f"({tgt_path}) has {len(tgt)}; parallel files must have the same number of lines"
        )
    return make_pairs(src, tgt, f"data.corpus.{src_key}/{tgt_key} ({src_path}, {tgt_path})")


def load_files(
    src_lang: str,
    tgt_lang: str,
    train_src: str | None = None,
    train_tgt: str | None = None,
    valid_src: str | None = None,
    valid_tgt: str | None = None,
    test_src: str | None = None,
    test_tgt: str | None = None,
    train: str | None = None,
    valid: str | None = None,
    test: str | None = None,
    max_train_pairs: int | None = None,
    name: str = "files",
) -> Corpus:
    """Reads train / valid / test from local files (see the module docstring for the layouts).

    Args:
        src_lang, tgt_lang: language codes (``data.src_lang``, ``data.tgt_lang``); the jsonl keys.
        train_src ... test_tgt: plain-text files, one sentence per line.
        train, valid, test: jsonl files (instead of the ``*_src``/``*_tgt`` pair of that split).
        max_train_pairs: keep only the first N training pairs (null = all).
        name: the corpus name.
    """
    if max_train_pairs is not None and max_train_pairs <= 0:
        raise ValueError(f"data.corpus.max_train_pairs must be positive or null, got {max_train_pairs}")
    files = dict(
        train_src=train_src,
        train_tgt=train_tgt,
        valid_src=valid_src,
        valid_tgt=valid_tgt,
        test_src=test_src,
        test_tgt=test_tgt,
        train=train,
        valid=valid,
        test=test,
    )
    splits = {split: _split_pairs(split, files, src_lang, tgt_lang) for split in SPLITS}
    splits["train"] = splits["train"][:max_train_pairs]
    return Corpus(name=name, splits=splits, src_lang=src_lang, tgt_lang=tgt_lang)
