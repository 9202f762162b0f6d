"""Training-loop pieces: schedule, decoding, a NaN loss stopping the run with a clear error, decode speed."""

import copy
import math

import pytest
import torch

from attnlab.data.synthetic import generate
from attnlab.data.tokenizers import SPECIAL_IDS
from attnlab.data.tokenizers.word import WordTokenizer
from attnlab.training.decode import DecodeSettings, greedy_decode
from attnlab.training.optim import OptimSettings, inverse_sqrt, optimizer_and_schedule, schedule_factor
from attnlab.training.task import NonFiniteLossError, TranslationTask, _output_lengths

from conftest import make_transformer


def _model(vocab_size=30):
    torch.manual_seed(0)
    return make_transformer(
        vocab_size,
        0,
        d_model=32,
        num_heads=2,
        ffn_dim=64,
        dropout=0.0,
    ).eval()


def test_inverse_sqrt_warms_up_linearly_then_decays_with_the_square_root():
    f = inverse_sqrt(100)
    assert f(0) == pytest.approx(0.01) and f(49) == pytest.approx(0.5) and f(99) == pytest.approx(1.0)
    assert f(399) == pytest.approx(0.5)


@pytest.mark.parametrize("schedule", ["linear", "cosine"])
def test_annealed_schedules_warm_up_then_reach_the_final_ratio_at_the_last_step(schedule):
    f = schedule_factor(OptimSettings(warmup_steps=10, schedule=schedule, final_lr_ratio=0.1), 110)
    assert f(0) == pytest.approx(0.1) and f(9) == pytest.approx(1.0)  # steps counted from 0 by LambdaLR
    assert f(59) == pytest.approx(0.55)  # halfway through the decay: linear and cosine agree there
    assert f(109) == pytest.approx(0.1) and f(500) == pytest.approx(0.1)  # the floor, kept after the end
    quarter = f(34)
    assert quarter == pytest.approx(
        0.775 if schedule == "linear" else 0.1 + 0.9 * (1 + math.cos(math.pi / 4)) / 2
    )
    factors = [f(s) for s in range(9, 111)]
    assert all(a >= b for a, b in zip(factors, factors[1:]))  # never rises after the warm-up


def test_the_scheduler_follows_the_factor_step_by_step():
    param = torch.nn.Parameter(torch.zeros(1))
    opt, sched = optimizer_and_schedule([param], OptimSettings(lr=1.0, warmup_steps=2, schedule="linear"), 4)
    seen = []
    for _ in range(5):
        seen.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert seen == pytest.approx([0.5, 1.0, 0.5, 0.0, 0.0])


@pytest.mark.parametrize("total", [-1, None])
def test_an_annealed_schedule_of_an_unbounded_run_says_which_key_to_set(total):
    with pytest.raises(ValueError, match="needs the run's length: set trainer.max_steps"):
        schedule_factor(OptimSettings(schedule="linear"), total)


def test_a_run_shorter_than_its_warm_up_ends_inside_it_as_under_inverse_sqrt():
    short = schedule_factor(OptimSettings(warmup_steps=50, schedule="cosine"), 20)
    assert [short(s) for s in range(20)] == pytest.approx([inverse_sqrt(50)(s) for s in range(20)])


def test_the_fused_adamw_step_equals_the_unfused_one():
    torch.manual_seed(0)
    model = _model()
    twin = copy.deepcopy(model)
    fused, _ = optimizer_and_schedule(model.parameters(), OptimSettings(lr=1e-2, warmup_steps=1))
    same = {k: fused.defaults[k] for k in ("lr", "betas", "eps", "weight_decay")}
    plain = torch.optim.AdamW(twin.parameters(), **same)
    assert fused.defaults["fused"] and not plain.defaults["fused"]
    src = torch.tensor([[5, 6, 7, 2], [8, 9, 2, 0]])
    for _ in range(3):  # the same gradients into both (Adam would amplify rounding in near-zero ones)
        model(src, src).logsumexp(-1).mean().backward()
        for a, b in zip(model.parameters(), twin.parameters()):
            b.grad = None if a.grad is None else a.grad.clone()
        fused.step()
        plain.step()
        fused.zero_grad()
        plain.zero_grad()
    for a, b in zip(model.parameters(), twin.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_unknown_schedules_and_ratios_are_refused():
    with pytest.raises(ValueError, match="optim.schedule must be one of inverse_sqrt, linear, cosine"):
        OptimSettings(schedule="step")
    with pytest.raises(ValueError, match="final_lr_ratio must be in"):
        OptimSettings(final_lr_ratio=1.5)


def test_greedy_decoding_stops_at_eos_and_respects_the_length_limit():
    model = _model()
    src = torch.tensor([[5, 6, 7, 2], [5, 2, 0, 0]])
    out = greedy_decode(model, src, SPECIAL_IDS, DecodeSettings(max_len_ratio=1.0, max_len_offset=2))
    lengths = (src != 0).sum(1)
    for row, limit in zip(out, (lengths + 2).tolist()):
        ids = row.tolist()
        assert 2 in ids[:limit]  # every sentence ends within its limit
        assert all(i == 0 for i in ids[ids.index(2) + 1 :])  # and only padding follows


def test_decoding_the_batch_equals_decoding_each_sentence_alone():
    model = _model()
    src = torch.tensor([[5, 6, 7, 8, 2], [9, 10, 2, 0, 0]])
    batch = greedy_decode(model, src, SPECIAL_IDS)
    for i, length in enumerate([5, 3]):
        alone = greedy_decode(model, src[i : i + 1, :length], SPECIAL_IDS)
        n = alone.size(1)
        assert batch[i, :n].tolist() == alone[0].tolist()


def test_a_nan_loss_stops_training_with_an_error_naming_the_learning_rate():
    corpus = generate(train_size=20, valid_size=5, test_size=5, test_long_size=2)
    tok = WordTokenizer.train(p.src + " " + p.tgt for p in corpus.splits["train"])
    task = TranslationTask(_model(tok.vocab_size), tok, ["test"], OptimSettings(lr=1e-3))
    task.train()
    with torch.no_grad():
        task.model.generator.weight.fill_(float("nan"))
    batch = {"src": torch.tensor([[5, 6, 2]]), "tgt": torch.tensor([[1, 7, 8, 2]])}
    task.optimizers = lambda: None
    with pytest.raises(NonFiniteLossError, match=r"train/loss became nan at step 0: lower optim.lr"):
        task.training_step(batch, 0)


@pytest.fixture(scope="module")
def tested():
    """An untrained tiny model tested on both evaluation splits."""
    import lightning as L

    from attnlab.data.datamodule import TranslationDataModule

    corpus = generate(train_size=40, valid_size=5, test_size=10, test_long_size=4)
    tok = WordTokenizer.train(p.src + " " + p.tgt for p in corpus.splits["train"])
    data = TranslationDataModule(corpus, tok, batch_size=8, eval_batch_size=4)
    task = TranslationTask(_model(tok.vocab_size), tok, corpus.eval_splits)
    trainer = L.Trainer(
        accelerator="cpu", devices=1, logger=False, enable_progress_bar=False, enable_model_summary=False
    )
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        metrics = trainer.test(task, datamodule=data, verbose=False)[0]
        val_metrics = trainer.validate(task, datamodule=data, verbose=False)[0]
    finally:
        torch.set_num_threads(threads)
    return task, data, metrics, val_metrics


def test_decoding_speed_is_reported_for_every_evaluation_split_at_test(tested):
    task, data, metrics, _ = tested
    for split in ("test", "test_long"):
        tokens_per_s = metrics[f"{split}/decode_tokens_per_s"]
        ms_per_sentence = metrics[f"{split}/decode_ms_per_sentence"]
        assert tokens_per_s > 0 and ms_per_sentence > 0
        tokens_per_sentence = tokens_per_s * ms_per_sentence / 1000  # generated tokens, <eos> included
        longest = max(len(task.tokenizer.encode(p.src)) + 1 for p in data.corpus.splits[split])
        assert (
            1.0 - 1e-3
            <= tokens_per_sentence
            <= longest * task.decode_settings.max_len_ratio + task.decode_settings.max_len_offset
        )
        assert {f"{split}/bleu", f"{split}/chrf"} <= set(metrics)


def test_validation_reports_bleu_chrf_and_the_unsmoothed_loss_of_the_whole_split_without_speed(tested):
    task, data, _, val_metrics = tested
    assert set(val_metrics) == {"val/bleu", "val/chrf", "val/loss", "val/ppl"}  # no decode speed here
    hyps, refs = task.translate(data.eval_dataloader("valid"))
    scores = task.corpus_scores(hyps, refs)
    assert val_metrics["val/bleu"] == torch.tensor(scores["bleu"]).float().item()
    assert val_metrics["val/chrf"] == torch.tensor(scores["chrf"]).float().item()
    with torch.no_grad():
        nll = [task.nll(batch, 0.0) for batch in data.eval_dataloader("valid")]
    loss = sum(float(total) for total, _ in nll) / sum(tokens for _, tokens in nll)
    assert val_metrics["val/loss"] == pytest.approx(loss, rel=1e-5)
    assert val_metrics["val/ppl"] == pytest.approx(math.exp(loss), rel=1e-4)


def test_translate_decodes_any_batches_as_the_test_does_without_touching_the_task_state(tested):
    task, data, metrics, _ = tested
    kept = {split: list(hyps) for split, hyps in task.hypotheses.items()}
    signature = task.bleu_signature
    hyps, refs = task.translate(reversed(list(data.eval_dataloader("test"))))  # any batch order
    assert hyps == task.hypotheses["test"] and refs == [p.tgt for p in data.corpus.splits["test"]]
    assert task.hypotheses == kept and task.bleu_signature == signature
    scores = task.corpus_scores(hyps, refs)
    assert torch.tensor(scores["bleu"]).float().item() == metrics["test/bleu"]
    assert torch.tensor(scores["chrf"]).float().item() == metrics["test/chrf"]


def test_generated_tokens_count_up_to_and_including_the_first_eos():
    out = torch.tensor([[5, 2, 0, 0], [2, 0, 0, 0], [5, 6, 7, 8], [0, 5, 2, 2]])
    assert _output_lengths(out, eos_id=2).tolist() == [2, 1, 4, 3]
