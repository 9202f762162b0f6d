"""Every score × posenc × mask composes through Hydra and trains 5 steps without NaN."""

from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir

from attnlab.data.datamodule import Collate, EncodedSplit
from attnlab.data.synthetic import generate
from attnlab.data.tokenizer import WordTokenizer
from attnlab.task import TranslationTask
from attnlab.train import CONF_DIR, build_model


def options(group: str) -> list[str]:
    return [p.stem for p in sorted((Path(CONF_DIR) / group).glob("*.yaml"))]


COMBOS = [
    (s, p, m)
    for s in options("attention/score")
    for p in options("posenc")
    for m in options("attention/mask")
]


@pytest.fixture(scope="module")
def batches():
    corpus = generate(train_size=40, valid_size=4, test_size=4, test_long_size=2)
    tok = WordTokenizer.train(
        [p.src for p in corpus.splits["train"]] + [p.tgt for p in corpus.splits["train"]]
    )
    split, collate = EncodedSplit(corpus.splits["train"], tok), Collate(tok.pad_id)
    return tok, [collate([split[i] for i in range(16)])]


@pytest.fixture(scope="module")
def compose_cfg():
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        yield lambda overrides: compose("train", overrides=overrides)


@pytest.mark.parametrize("score,posenc,mask", COMBOS, ids=["-".join(c) for c in COMBOS])
def test_every_score_posenc_and_mask_combination_trains_without_nan(
    score, posenc, mask, batches, compose_cfg
):
    tok, data = batches
    cfg = compose_cfg(
        [
            f"attention/score={score}",
            f"posenc={posenc}",
            f"attention/mask={mask}",
            "model.d_model=16",
            "model.num_heads=2",
            "model.ffn_dim=32",
            "model.encoder_layers=1",
            "model.decoder_layers=1",
            "optim.warmup_steps=2",
        ]
    )
    torch.manual_seed(0)
    task = TranslationTask(
        build_model(cfg, tok.vocab_size, tok.pad_id),
        tok,
        ["test"],
        lr=cfg.optim.lr,
        warmup_steps=cfg.optim.warmup_steps,
    )
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
    assert all(torch.isfinite(torch.tensor(losses)))
    assert all(torch.isfinite(p).all() for p in task.parameters())
    assert losses[-1] < losses[0]
