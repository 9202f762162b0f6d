from attnlab.data.synthetic import generate

SMALL = dict(train_size=300, valid_size=50, test_size=50, test_long_size=30)


def test_the_same_seed_generates_the_same_corpus_and_another_seed_a_different_one():
    a, b, c = generate(seed=3, **SMALL), generate(seed=3, **SMALL), generate(seed=4, **SMALL)
    assert a.splits == b.splits
    assert a.splits["train"] != c.splits["train"]


def test_split_sizes_follow_the_arguments():
    corpus = generate(seed=0, **SMALL)
    assert {k: len(v) for k, v in corpus.splits.items()} == {
        "train": 300,
        "valid": 50,
        "test": 50,
        "test_long": 30,
    }


def test_every_alignment_link_points_inside_both_sentences_and_every_target_word_is_aligned():
    corpus = generate(seed=1, **SMALL)
    for pairs in corpus.splits.values():
        for pair in pairs:
            n_src, n_tgt = len(pair.src.split()), len(pair.tgt.split())
            assert all(0 <= s < n_src and 0 <= t < n_tgt for s, t in pair.alignment)
            assert {t for _, t in pair.alignment} == set(range(n_tgt))


def test_alignments_link_translations_including_many_to_one_words():
    from attnlab.data.synthetic.grammar import _Clause, _NounPhrase, render

    dog = _NounPhrase("dog", plural=True, det="the", numeral="two", adjectives=[("big", True)])
    cat = _NounPhrase("cat", plural=False, det="a", numeral=None, adjectives=[])
    garden = _NounPhrase("garden", plural=False, det="the", numeral=None, adjectives=[], place_prep="in")
    pair = render([_Clause(dog, "see", True, cat, garden)])
    assert pair.src == "the two very big dogs do not see a cat in the garden"
    assert pair.tgt == "ĝardene vufaj granissimaj du ta maŭon vidneen"
    src, tgt = pair.src.split(), pair.tgt.split()
    linked = {(src[s], tgt[t]) for s, t in pair.alignment}
    assert {("very", "granissimaj"), ("big", "granissimaj")} <= linked  # many-to-one adjective
    assert {("do", "vidneen"), ("not", "vidneen"), ("see", "vidneen")} <= linked  # negated verb
    assert {("in", "ĝardene"), ("the", "ĝardene"), ("garden", "ĝardene")} <= linked  # fused PP
    assert "a" not in {s for s, _ in linked}  # the indefinite article has no translation


def test_test_long_is_strictly_longer_than_anything_in_train_on_both_sides():
    corpus = generate(seed=2, **SMALL, max_len=12, long_min_len=18)
    longest_train = max(max(len(p.src.split()), len(p.tgt.split())) for p in corpus.splits["train"])
    shortest_long = min(min(len(p.src.split()), len(p.tgt.split())) for p in corpus.splits["test_long"])
    assert longest_train <= 12 < 18 <= shortest_long


def test_evaluation_sentences_never_occur_in_training():
    corpus = generate(seed=5, **SMALL)
    train = {p.src for p in corpus.splits["train"]}
    for split in ("valid", "test", "test_long"):
        assert not train & {p.src for p in corpus.splits[split]}


def test_a_generated_corpus_is_cached_by_its_arguments_and_a_damaged_cache_file_is_made_again(
    tmp_path, monkeypatch
):
    import attnlab.data.synthetic as synthetic

    small = dict(train_size=30, valid_size=5, test_size=5, test_long_size=3)
    fresh = generate(**small)
    first = generate(**small, cache_dir=tmp_path)
    [file] = tmp_path.glob("synthetic-*.pkl")
    assert first.splits == fresh.splits
    with monkeypatch.context() as patch:  # the second call must read the file, not sample again

        def no_sampling(*args, **kwargs):
            raise AssertionError("sampled although the corpus is cached")

        patch.setattr(synthetic, "_sample_split", no_sampling)
        assert generate(**small, cache_dir=tmp_path).splits == fresh.splits
    file.write_bytes(b"not a pickle")
    again = generate(**small, cache_dir=tmp_path)
    assert again.splits == fresh.splits and file.read_bytes() != b"not a pickle"
    generate(**{**small, "seed": 1}, cache_dir=tmp_path)
    assert len(list(tmp_path.glob("synthetic-*.pkl"))) == 2  # other arguments, another file
