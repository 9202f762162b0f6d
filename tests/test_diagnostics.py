"""Known-answer tests for attention entropy, peak weight and alignment error rate."""

import math

import pytest
import torch

from attnlab.analysis.diagnostics import (
    alignment_error_rate,
    alignments_from_attention,
    attention_entropy,
    cross_attention_aer,
    max_weight,
)


def uniform_and_one_hot(t: int = 4) -> torch.Tensor:
    """(2, t, t): head 0 uniform over t keys, head 1 one-hot on the diagonal."""
    return torch.stack([torch.full((t, t), 1.0 / t), torch.eye(t)])


def test_entropy_of_a_uniform_row_is_log_n_and_of_a_one_hot_row_is_zero():
    entropy = attention_entropy(uniform_and_one_hot(4))
    assert entropy.shape == (2,)
    assert torch.allclose(entropy, torch.tensor([math.log(4), 0.0]))


def test_entropy_ignores_fully_masked_rows():
    p = uniform_and_one_hot(4)
    p[:, 3] = 0.0
    p[0, 2] = torch.tensor([0.5, 0.5, 0.0, 0.0])
    # Head 0 rows: log 4, log 4, log 2 (row 3 masked) -> mean over 3 rows, not 4.
    expected = torch.tensor([(2 * math.log(4) + math.log(2)) / 3, 0.0])
    assert torch.allclose(attention_entropy(p), expected)


def test_entropy_respects_the_row_mask():
    p = uniform_and_one_hot(4)
    p[0, 0] = torch.tensor([1.0, 0.0, 0.0, 0.0])
    keep_first_row = torch.tensor([True, False, False, False])
    assert torch.allclose(attention_entropy(p, keep_first_row), torch.zeros(2))
    keep_the_rest = ~keep_first_row
    assert torch.allclose(attention_entropy(p, keep_the_rest), torch.tensor([math.log(4), 0.0]))


def test_batched_entropy_averages_every_valid_row_equally_over_the_batch():
    first = uniform_and_one_hot(4)  # head 0: 4 rows of log 4
    second = uniform_and_one_hot(4)
    second[0] = torch.eye(4)  # head 0: 4 rows of 0
    second[:, 2:] = 0.0  # only 2 of them valid
    p = torch.stack([first, second])  # (2, 2, 4, 4)
    entropy = attention_entropy(p)
    assert entropy.shape == (2,)
    assert torch.allclose(entropy, torch.tensor([4 * math.log(4) / 6, 0.0]))


def test_batched_row_mask_of_shape_b_by_t_q_selects_rows_in_each_sentence():
    p = torch.stack([uniform_and_one_hot(4), uniform_and_one_hot(4)])  # (2, 2, 4, 4)
    p[1, 0] = torch.eye(4)
    row_mask = torch.tensor([[True, True, False, False], [True, True, True, True]])
    # Head 0: 2 rows of log 4 in sentence 0 and 4 rows of 0 in sentence 1.
    expected = torch.tensor([2 * math.log(4) / 6, 0.0])
    assert torch.allclose(attention_entropy(p, row_mask), expected)


def test_max_weight_is_the_mean_peak_over_valid_rows():
    p = torch.tensor(
        [
            [[0.5, 0.5, 0.0], [0.2, 0.3, 0.5], [0.0, 0.0, 0.0]],
            [[0.1, 0.9, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]],
        ]
    )  # (2, 3, 3); last query row masked
    assert torch.allclose(max_weight(p), torch.tensor([0.5, 0.95]))
    assert torch.allclose(max_weight(p.unsqueeze(0)), torch.tensor([0.5, 0.95]))
    assert torch.allclose(max_weight(p, torch.tensor([False, True, True])), torch.tensor([0.5, 1.0]))


def test_entropy_and_max_weight_refuse_bad_shapes_and_heads_without_rows():
    with pytest.raises(ValueError, match=r"\(h, t_q, t_k\) or \(b, h, t_q, t_k\), got \(4, 4\)"):
        attention_entropy(torch.eye(4))
    with pytest.raises(ValueError, match=r"got \(3,\)"):
        max_weight(uniform_and_one_hot(4), torch.ones(3, dtype=torch.bool))
    with pytest.raises(ValueError, match="boolean row_mask"):
        attention_entropy(uniform_and_one_hot(4), torch.ones(4))
    with pytest.raises(ValueError, match=r"no valid query rows for heads \[0, 1\]"):
        attention_entropy(torch.zeros(2, 3, 3))


def test_alignments_link_each_target_word_to_its_argmax_source_word_and_skip_masked_rows():
    p = torch.tensor([[0.1, 0.7, 0.2], [0.6, 0.3, 0.1], [0.0, 0.0, 0.0], [0.2, 0.2, 0.6]])  # (t_tgt, t_src)
    assert alignments_from_attention(p) == {(1, 0), (0, 1), (2, 3)}


def test_a_diagonal_map_scores_aer_zero_against_diagonal_gold():
    hyp = [alignments_from_attention(torch.eye(5))]
    assert alignment_error_rate(hyp, [[(i, i) for i in range(5)]]) == 0.0


def test_aer_with_two_of_three_links_right_is_one_third():
    hyp = [{(0, 0), (1, 1), (0, 2)}]
    gold = [[(0, 0), (1, 1), (2, 2)]]
    assert alignment_error_rate(hyp, gold) == pytest.approx(1 - 2 * 2 / (3 + 3))


def test_aer_sums_counts_over_sentences_before_dividing():
    hyp = [{(0, 0)}, {(0, 0), (1, 0), (2, 0)}]
    gold = [[(0, 0)], [(5, 5)]]
    # |A∩G| = 1, |A| = 4, |G| = 2 -> 1 - 2/6; averaging per-sentence AERs would give 0.5.
    assert alignment_error_rate(hyp, gold) == pytest.approx(1 - 2 / 6)


def test_aer_refuses_empty_alignments_and_mismatched_sentence_counts():
    with pytest.raises(ValueError, match="2 sentences with no links"):
        alignment_error_rate([set(), set()], [[], []])
    with pytest.raises(ValueError, match="1 hypothesis sentences but 2 gold"):
        alignment_error_rate([{(0, 0)}], [[(0, 0)], [(1, 1)]])


def diagonal_head_maps(t: int) -> torch.Tensor:
    """(2, 2, t, t): layer 0 head 1 diagonal, every other head anti-diagonal."""
    anti = torch.eye(t).flip(-1)
    maps = anti.expand(2, 2, t, t).clone()
    maps[0, 1] = torch.eye(t)
    return maps


def test_cross_attention_aer_finds_the_diagonal_head_and_scores_the_others_as_wrong():
    maps = [diagonal_head_maps(3), diagonal_head_maps(4)]
    gold = [tuple((i, i) for i in range(3)), tuple((i, i) for i in range(4))]
    result = cross_attention_aer(maps, gold)
    # Anti-diagonal hits the gold only at the centre of the odd-length sentence: 1 of 7 links.
    wrong = 1 - 2 * 1 / (7 + 7)
    assert torch.allclose(result["per_head"], torch.tensor([[wrong, 0.0], [wrong, wrong]]))
    assert result["best"] == (0, 1, 0.0)
    # Layer 0 averages diagonal and anti-diagonal: ties go to the lower source index.
    # Sentence of 3: rows pick 0, 1, 0 -> 2 hits; sentence of 4: 0, 1, 1, 0 -> 2 hits.
    layer0 = 1 - 2 * 4 / (7 + 7)
    assert torch.allclose(result["layer_avg"], torch.tensor([layer0, wrong]))


def test_cross_attention_aer_refuses_mismatched_inputs():
    with pytest.raises(ValueError, match="2 maps but 1 gold"):
        cross_attention_aer([diagonal_head_maps(3)] * 2, [((0, 0),)])
    with pytest.raises(ValueError, match="at least one sentence"):
        cross_attention_aer([], [])
    with pytest.raises(ValueError, match=r"map 0 is \(3, 3\)"):
        cross_attention_aer([torch.eye(3)], [((0, 0),)])
    with pytest.raises(ValueError, match=r"map 1 has \(l, h\) = \(1, 2\), map 0 has \(2, 2\)"):
        cross_attention_aer([diagonal_head_maps(3), diagonal_head_maps(3)[:1]], [((0, 0),), ((0, 0),)])
