"""Real data: local files (``data=files``) train and evaluate through the CLI; bad data and an
unreachable hub stop at once with one line that names the file or key."""

import json
import socket
from pathlib import Path

import pytest

from attnlab.data.files import load_files
from attnlab.data.hub import load_hub
from attnlab.data.tokenizers import load_tokenizer

from conftest import results_of

MULTI30K = Path(__file__).parents[2] / "shared" / "data" / "multi30k"
LINES = {"train": 300, "val": 30, "test": 30}
# A 3-step run of a 1-layer model; no attention plots (slow to draw for untrained, max-length output).
SMALL_RUN = [
    "model.d_model=32",
    "model.ffn_dim=64",
    "model.num_heads=2",
    "model.encoder_layers=1",
    "model.decoder_layers=1",
    "data.tokenizer.vocab_size=300",
    "data.max_tokens=512",
    "trainer.max_steps=3",
    "logger=none",
    "quiet=true",
    "diagnostics.attention_maps=false",
    "diagnostics.attention_stats=false",
]


@pytest.fixture(scope="module")
def slice_dir(tmp_path_factory) -> Path:
    """The first lines of Multi30k train / val / test, en and de, in a temporary folder."""
    if not MULTI30K.is_dir():
        pytest.skip(f"Multi30k not found at {MULTI30K} (the shared data folder beside the checkout)")
    out = tmp_path_factory.mktemp("multi30k")
    for split, n in LINES.items():
        for lang in ("en", "de"):
            with open(MULTI30K / f"{split}.{lang}", encoding="utf-8") as f:
                lines = [next(f) for _ in range(n)]
            (out / f"{split}.{lang}").write_text("".join(lines), encoding="utf-8")
    return out


@pytest.fixture
def hf_cache(tmp_path, monkeypatch):
    """``datasets`` writes its cache under tmp_path (also for CLI subprocesses, which copy the env)."""
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf"))


def file_keys(d: Path, **changes: str) -> list[str]:
    keys = {
        f"{split}_{side}": str(d / f"{name}.{lang}")
        for split, name in (("train", "train"), ("valid", "val"), ("test", "test"))
        for side, lang in (("src", "en"), ("tgt", "de"))
    }
    keys.update(changes)
    return ["data=files"] + [f"data.corpus.{k}={v}" for k, v in keys.items()]


def assert_one_line_error(proc, expected: str) -> None:
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("attnlab-train: error: ") and expected in lines[0], lines[0]
    assert "Traceback" not in proc.stdout + proc.stderr


def test_local_files_train_and_evaluate_through_the_cli(train_in_process, tmp_path, slice_dir, hf_cache):
    cache = tmp_path / "spm"
    proc = train_in_process(*file_keys(slice_dir), *SMALL_RUN, f"data.tokenizer.cache_dir={cache}")
    assert proc.returncode == 0, proc.stderr
    res = results_of(tmp_path)
    assert res["status"] == "completed" and res["choices"]["data"] == "files"
    assert 0.0 <= res["metrics"]["test/bleu"] <= 100.0
    run = tmp_path / "run"
    assert len((run / "hyp" / "test.txt").read_text().splitlines()) == LINES["test"]
    assert len(list(cache.glob("bpe-300-*.model"))) == 1  # the cached model
    tokenizer = load_tokenizer(run / "tokenizer")  # the run dir carries its tokenizer
    assert tokenizer.vocab_size == 300 and tokenizer.decode(tokenizer.encode("Ein Hund.")) == "Ein Hund."


def test_a_missing_file_gives_a_one_line_error_naming_the_key(
    train_in_process, tmp_path, slice_dir, hf_cache
):
    proc = train_in_process(*file_keys(slice_dir, valid_tgt=str(tmp_path / "nope.de")), *SMALL_RUN)
    assert_one_line_error(proc, "data.corpus.valid_tgt: no such file")
    assert results_of(tmp_path)["status"] == "failed"


def test_unequal_line_counts_give_a_one_line_error_naming_both_files(
    train_in_process, tmp_path, slice_dir, hf_cache
):
    short = tmp_path / "short.de"
    short.write_text("".join((slice_dir / "train.de").read_text().splitlines(keepends=True)[:-1]))
    proc = train_in_process(*file_keys(slice_dir, train_tgt=str(short)), *SMALL_RUN)
    assert_one_line_error(proc, "has 300 lines but data.corpus.train_tgt")


def test_offline_a_hub_dataset_fails_without_touching_the_network_and_suggests_local_files(
    tmp_path, hf_cache, monkeypatch
):
    def no_network(*args, **kwargs):
        raise AssertionError("the hub loader opened a network connection while offline")

    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setattr(socket.socket, "connect", no_network)
    with pytest.raises(ValueError, match="data=files data.corpus.train_src=") as err:
        load_hub("bentrevett/multi30k", "en", "de")
    assert "\n" not in str(err.value)


def test_an_unreachable_hub_is_refused_before_datasets_starts_its_retries(tmp_path, hf_cache, monkeypatch):
    import datasets

    import attnlab.data.hub as hub

    def no_load(*args, **kwargs):
        raise AssertionError("load_dataset called although the hub is unreachable")

    monkeypatch.setattr(hub, "hub_offline", lambda: False)
    monkeypatch.setattr(hub, "hub_reachable", lambda timeout=hub.PROBE_TIMEOUT_S: False)
    monkeypatch.setattr(datasets, "load_dataset", no_load)
    with pytest.raises(ValueError, match="cannot reach the HuggingFace hub .*data=files"):
        load_hub("bentrevett/multi30k", "en", "de")


def test_a_hub_option_on_the_cli_fails_with_one_line(train_in_process, hf_cache):
    proc = train_in_process("data=multi30k", "logger=none", "quiet=true")
    assert_one_line_error(proc, "use local files instead: data=files")


def test_jsonl_files_keyed_by_language_load_in_either_layout(tmp_path, hf_cache):
    flat = tmp_path / "flat.jsonl"
    flat.write_text(
        "".join(json.dumps({"en": f" A dog {i}. ", "de": f"Ein\u00a0Hund {i}."}) + "\n" for i in range(5))
    )
    nested = tmp_path / "nested.jsonl"
    nested.write_text(
        "".join(
            json.dumps({"translation": {"en": f"A cat {i}.", "de": f"Eine Katze {i}."}}) + "\n"
            for i in range(3)
        )
    )
    corpus = load_files("en", "de", train=str(flat), valid=str(nested), test=str(nested))
    assert corpus.splits["train"][0].src == "A dog 0." and corpus.splits["train"][0].tgt == "Ein Hund 0."
    assert [p.tgt for p in corpus.splits["valid"]] == [f"Eine Katze {i}." for i in range(3)]
    reversed_corpus = load_files("de", "en", train=str(flat), valid=str(nested), test=str(nested))
    assert reversed_corpus.splits["test"][2].src == "Eine Katze 2."


def test_a_language_missing_from_the_data_names_the_key_and_what_is_there(tmp_path, hf_cache):
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"en": "A dog.", "de": "Ein Hund."}) + "\n")
    with pytest.raises(
        ValueError, match=r"data.tgt_lang 'fr' is not a key of data.corpus.train .*it has: de, en"
    ):
        load_files("en", "fr", train=str(rows), valid=str(rows), test=str(rows))


def test_an_empty_split_and_an_unset_split_give_one_line_errors(tmp_path, slice_dir, hf_cache):
    empty_en, empty_de = tmp_path / "empty.en", tmp_path / "empty.de"
    empty_en.write_text("\n \n")
    empty_de.write_text("\n\u00a0\n")
    keys = {k.split("=")[0].removeprefix("data.corpus."): k.split("=")[1] for k in file_keys(slice_dir)[1:]}
    with pytest.raises(ValueError, match=r"data.corpus.test_src/test_tgt .*no sentence pairs"):
        load_files("en", "de", **{**keys, "test_src": str(empty_en), "test_tgt": str(empty_de)})
    with pytest.raises(ValueError, match="data=files needs the valid split: set data.corpus.valid_src="):
        load_files("en", "de", **{**keys, "valid_src": None})


def test_files_are_stripped_and_capped_to_max_train_pairs(slice_dir, hf_cache):
    keys = {k.split("=")[0].removeprefix("data.corpus."): k.split("=")[1] for k in file_keys(slice_dir)[1:]}
    corpus = load_files("en", "de", max_train_pairs=50, **keys)
    assert len(corpus.splits["train"]) == 50 and len(corpus.splits["test"]) == LINES["test"]
    for pair in corpus.splits["train"]:
        assert pair.src == " ".join(pair.src.split()) and pair.tgt == " ".join(pair.tgt.split())
