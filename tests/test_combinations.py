"""Score × posenc × mask combinations compose through Hydra and train 5 steps without NaN, the loss
falling: every pair of options of two groups (an all-pairs covering array, ``pairwise_combos``) and the
riskiest triples (``RISKY_COMBOS``); every score and every posenc also trains with queries and keys
narrower than values (``model.key_dim``)."""

import pytest
import torch

from attnlab.data.datamodule import Collate, EncodedSplit
from attnlab.data.synthetic import generate
from attnlab.data.tokenizers.word import WordTokenizer
from attnlab.training.build import build_model
from attnlab.training.optim import OptimSettings
from attnlab.training.task import TranslationTask

from conftest import SMALL_MODEL as SMALL
from conftest import combos_to_test, config_options, pairwise_combos

COMBOS = combos_to_test()


@pytest.fixture(scope="module")
def batches():
    corpus = generate(train_size=40, valid_size=4, test_size=4, test_long_size=2)
    tok = WordTokenizer.train(
        [p.src for p in corpus.splits["train"]] + [p.tgt for p in corpus.splits["train"]]
    )
    split, collate = EncodedSplit(corpus.splits["train"], tok), Collate(tok.pad_id)
    return tok, [collate([split[i] for i in range(16)])]


def train_five_steps(cfg, batches) -> tuple[TranslationTask, list[float]]:
    """The task ``cfg`` builds and its losses over 5 optimiser steps on one batch."""
    tok, data = batches
    torch.manual_seed(0)
    optim = OptimSettings(lr=cfg.optim.lr, warmup_steps=cfg.optim.warmup_steps)
    task = TranslationTask(build_model(cfg, tok.vocab_size, tok.pad_id), tok, ["test"], optim)
    opt = task.configure_optimizers()["optimizer"]
    task.train()
    losses = []
    for _ in range(5):  # the same batch each step, so the loss must fall
        total, tokens = task.nll(data[0], smoothing=0.1)
        loss = total / tokens
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return task, losses


def test_the_combinations_cover_every_pair_of_options_of_two_groups():
    options = [config_options(g) for g in ("attention/score", "posenc", "attention/mask")]
    for a, b in ((0, 1), (0, 2), (1, 2)):
        pairs = {(c[a], c[b]) for c in pairwise_combos()}
        assert pairs == {(x, y) for x in options[a] for y in options[b]}
    assert len(pairwise_combos()) == len(options[0]) * len(options[1])  # the smallest such set


@pytest.mark.parametrize("score,posenc,mask", COMBOS, ids=["-".join(c) for c in COMBOS])
def test_every_score_posenc_and_mask_combination_trains_without_nan(
    score, posenc, mask, batches, compose_cfg
):
    cfg = compose_cfg([f"attention/score={score}", f"posenc={posenc}", f"attention/mask={mask}", *SMALL])
    task, losses = train_five_steps(cfg, batches)
    assert all(torch.isfinite(torch.tensor(losses)))
    assert all(torch.isfinite(p).all() for p in task.parameters())
    assert losses[-1] < losses[0]


# each score once and each posenc once (the pairs rotate), with d_k = 4 < d_v = 8
SCORES, POSENCS = config_options("attention/score"), config_options("posenc")
KEY_DIM_PAIRS = sorted(
    {(s, POSENCS[i % len(POSENCS)]) for i, s in enumerate(SCORES)}
    | {(SCORES[j % len(SCORES)], p) for j, p in enumerate(POSENCS)}
)


@pytest.mark.parametrize("score,posenc", KEY_DIM_PAIRS, ids=["-".join(c) for c in KEY_DIM_PAIRS])
def test_every_score_and_posenc_trains_with_queries_and_keys_narrower_than_values(
    score, posenc, batches, compose_cfg
):
    cfg = compose_cfg([f"attention/score={score}", f"posenc={posenc}", *SMALL, "model.key_dim=4"])
    task, losses = train_five_steps(cfg, batches)
    assert all(torch.isfinite(torch.tensor(losses)))
    assert all(torch.isfinite(p).all() for p in task.parameters())
    assert losses[-1] < losses[0]
