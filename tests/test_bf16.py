"""bfloat16 mixed precision without a GPU: every score × posenc (the pairwise covering set, which also
rotates the masks) trains a few optimiser steps under ``torch.autocast("cpu", dtype=torch.bfloat16)``,
what Lightning's ``trainer.precision=bf16-mixed`` does, with finite losses and gradients and attention
computed in bfloat16; and one real Lightning run takes ``trainer.precision=bf16-mixed`` from the config
end to end. These catch dtype bugs (a float32 bias or rotation meeting bfloat16 queries, a mask fill
that overflows) on a machine without CUDA."""

import pytest
import torch
from omegaconf import open_dict

from attnlab.attention.multi_head import MultiHeadAttention
from attnlab.data.datamodule import Collate, EncodedSplit
from attnlab.data.synthetic import generate
from attnlab.data.tokenizers.word import WordTokenizer
from attnlab.training.build import build_model
from attnlab.training.optim import OptimSettings
from attnlab.training.run import Job, train
from attnlab.training.task import TranslationTask

from conftest import SMALL_MODEL as SMALL
from conftest import compose, pairwise_combos

COMBOS = pairwise_combos()


@pytest.fixture(scope="module")
def batch():
    corpus = generate(train_size=40, valid_size=4, test_size=4, test_long_size=2)
    tok = WordTokenizer.train(
        [p.src for p in corpus.splits["train"]] + [p.tgt for p in corpus.splits["train"]]
    )
    split = EncodedSplit(corpus.splits["train"], tok)
    return tok, Collate(tok.pad_id)([split[i] for i in range(16)])


def attention_output_dtypes(model: torch.nn.Module) -> tuple[set[torch.dtype], list]:
    """Records the dtype of every ``MultiHeadAttention`` output; returns (the set, the hook handles)."""
    dtypes: set[torch.dtype] = set()
    hooks = [
        m.register_forward_hook(lambda _m, _args, out: dtypes.add(out.dtype))
        for m in model.modules()
        if isinstance(m, MultiHeadAttention)
    ]
    return dtypes, hooks


@pytest.mark.parametrize("score,posenc,mask", COMBOS, ids=["-".join(c) for c in COMBOS])
def test_every_score_and_posenc_trains_under_bf16_autocast_with_finite_gradients(
    score, posenc, mask, batch, compose_cfg, one_thread
):
    tok, data = batch
    cfg = compose_cfg([f"attention/score={score}", f"posenc={posenc}", f"attention/mask={mask}", *SMALL])
    torch.manual_seed(0)
    optim = OptimSettings(lr=cfg.optim.lr, warmup_steps=cfg.optim.warmup_steps)
    task = TranslationTask(build_model(cfg, tok.vocab_size, tok.pad_id), tok, ["test"], optim)
    opt = task.configure_optimizers()["optimizer"]
    task.train()
    dtypes, hooks = attention_output_dtypes(task)
    for _ in range(3):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            total, tokens = task.nll(data, smoothing=0.1)
            loss = total / tokens
        opt.zero_grad()
        loss.backward()
        grads = [p.grad for p in task.parameters() if p.grad is not None]
        assert torch.isfinite(loss), f"loss {loss.item()}"
        assert grads and all(torch.isfinite(g).all() for g in grads)
        opt.step()
    for h in hooks:
        h.remove()
    assert dtypes == {torch.bfloat16}  # attention really ran in bf16 (autocast reached every site)
    assert all(p.dtype == torch.float32 and torch.isfinite(p).all() for p in task.parameters())


def test_a_lightning_run_with_bf16_mixed_precision_trains_and_tests(tmp_path, monkeypatch):
    dtypes: set[torch.dtype] = set()
    forward = MultiHeadAttention.forward

    def recording_forward(self, *args, **kwargs):
        out = forward(self, *args, **kwargs)
        dtypes.add(out.dtype)
        return out

    monkeypatch.setattr(MultiHeadAttention, "forward", recording_forward)
    overrides = [
        "trainer.precision=bf16-mixed",
        "trainer.fast_dev_run=true",
        "logger=none",
        "quiet=true",
        "diagnostics.attention_maps=false",
        "diagnostics.attention_stats=false",
        "posenc=alibi",
        "attention/mask=local",
        "model.d_model=32",
        "model.num_heads=2",
        "model.ffn_dim=64",
        "model.encoder_layers=1",
        "model.decoder_layers=1",
        "data.corpus.train_size=200",
        "data.corpus.valid_size=16",
        "data.corpus.test_size=16",
        "data.corpus.test_long_size=8",
    ]
    cfg = compose(overrides, return_hydra_config=True)
    choices = {k: v for k, v in cfg.hydra.runtime.choices.items() if not k.startswith("hydra") and v}
    with open_dict(cfg):
        del cfg.hydra
    metrics, _ = train(cfg, Job(tmp_path, choices))
    assert {"test/bleu", "val/loss"} <= set(metrics)
    assert torch.isfinite(torch.tensor(metrics["val/loss"]))
    assert dtypes == {torch.bfloat16}  # the precision reached attention in training and evaluation
