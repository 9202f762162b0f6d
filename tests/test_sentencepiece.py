"""The SentencePiece tokenizer: WordTokenizer's interface, quiet training, a cache keyed by its inputs."""

from pathlib import Path

import pytest

from attnlab.data.tokenizers import load_tokenizer
from attnlab.data.tokenizers.sentencepiece import SentencePieceTokenizer
from attnlab.data.tokenizers.word import WordTokenizer

MULTI30K = Path(__file__).parents[2] / "shared" / "data" / "multi30k"


@pytest.fixture(scope="module")
def sentences() -> list[str]:
    """The first 500 Multi30k training pairs, English and German, stripped."""
    if not MULTI30K.is_dir():
        pytest.skip(f"Multi30k not found at {MULTI30K} (the shared data folder beside the checkout)")
    out = []
    for lang in ("en", "de"):
        with open(MULTI30K / f"train.{lang}", encoding="utf-8") as f:
            out += [" ".join(next(f).split()) for _ in range(500)]
    return out


def train(sentences, cache_dir, **settings) -> SentencePieceTokenizer:
    return SentencePieceTokenizer.train(sentences, **{"vocab_size": 300, "cache_dir": cache_dir, **settings})


def test_training_is_quiet_and_ids_0_to_3_are_the_specials(sentences, tmp_path, capfd):
    tok = train(sentences, tmp_path)
    out, err = capfd.readouterr()
    assert out == "" and err == ""
    assert (tok.pad_id, tok.bos_id, tok.eos_id, tok.unk_id) == (0, 1, 2, 3)
    assert tok.tokens([0, 1, 2, 3]) == ["<pad>", "<bos>", "<eos>", "<unk>"]
    assert tok.vocab_size == 300


@pytest.mark.parametrize("model_type", ["bpe", "unigram"])
def test_decode_inverts_encode_stopping_at_eos_and_dropping_pad_and_bos(sentences, tmp_path, model_type):
    tok = train(sentences, tmp_path, model_type=model_type)
    for s in sentences[:20] + sentences[500:520]:
        ids = tok.encode(s)
        assert all(4 <= i < tok.vocab_size for i in ids)
        assert tok.decode([tok.bos_id] + ids + [tok.eos_id, 7, 8, tok.pad_id]) == s
    assert "".join(tok.tokens(tok.encode("A dog runs."))).replace("▁", " ").strip() == "A dog runs."


def test_a_second_training_on_the_same_text_and_settings_reuses_the_cached_model(sentences, tmp_path):
    first = train(sentences, tmp_path)
    assert not first.from_cache and first.model_path.is_file()
    mtime = first.model_path.stat().st_mtime_ns
    second = train(sentences, tmp_path)
    assert second.from_cache and second.model_path == first.model_path
    assert second.model_path.stat().st_mtime_ns == mtime
    assert second.encode(sentences[3]) == first.encode(sentences[3])


def test_the_cache_is_invalidated_by_a_new_vocab_size_or_new_text(sentences, tmp_path):
    base = train(sentences, tmp_path)
    bigger = train(sentences, tmp_path, vocab_size=350)
    other_text = train(sentences[:-1], tmp_path)
    assert not bigger.from_cache and bigger.vocab_size == 350
    assert not other_text.from_cache
    assert len({base.model_path, bigger.model_path, other_text.model_path}) == 3
    assert len(list(tmp_path.glob("*.model"))) == 3


def test_separate_vocabularies_are_refused_with_a_clear_error(sentences, tmp_path):
    with pytest.raises(ValueError, match="data.tokenizer.joint=false is not supported"):
        train(sentences, tmp_path, joint=False)


def test_a_vocab_too_large_for_the_text_names_the_key(tmp_path):
    with pytest.raises(ValueError, match="data.tokenizer.vocab_size=5000"):
        SentencePieceTokenizer.train(["a small text", "with few pieces"], vocab_size=5000, cache_dir=None)


def test_both_tokenizers_save_to_a_directory_and_load_back(sentences, tmp_path):
    spm_tok = train(sentences, tmp_path / "cache")
    word_tok = WordTokenizer.train(sentences)
    for tok, name in ((spm_tok, "spm"), (word_tok, "word")):
        directory = tok.save(tmp_path / name)
        loaded = load_tokenizer(directory)
        assert type(loaded) is type(tok) and loaded.vocab_size == tok.vocab_size
        assert loaded.encode(sentences[7]) == tok.encode(sentences[7])
        assert loaded.tokens(range(10)) == tok.tokens(range(10))
