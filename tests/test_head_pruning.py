"""Head pruning by importance (Michel et al., 2019): order, gates, and the test-time callback."""

import csv
import json
from types import SimpleNamespace

import lightning as L
import pytest
import torch
from lightning.pytorch.loggers import CSVLogger

from attnlab.analysis.head_importance import (
    head_gates,
    heads_to_prune,
    normalise_by_layer,
    prune_heads,
    pruned_count,
    pruning_order,
)
from attnlab.data.datamodule import TranslationDataModule
from attnlab.data.synthetic import generate
from attnlab.data.tokenizers.word import WordTokenizer
from attnlab.rundir import RunDir
from attnlab.training.callbacks.head_pruning import HeadPruning, percent_label
from attnlab.training.optim import OptimSettings
from attnlab.training.task import TranslationTask

from conftest import make_transformer, results_of

HEADS, LAYERS = 4, 2  # 2 encoder + 2 decoder layers: 6 attention layers, 24 heads
FRACTIONS = [0.0, 0.2, 0.4, 0.6, 0.8]


pytestmark = pytest.mark.usefixtures("one_thread")


def make_data(train_size=60, valid_size=10, test_size=12, test_long_size=3):
    corpus = generate(
        train_size=train_size, valid_size=valid_size, test_size=test_size, test_long_size=test_long_size
    )
    pairs = corpus.splits["train"]
    tok = WordTokenizer.train([p.src for p in pairs] + [p.tgt for p in pairs])
    return corpus, tok, TranslationDataModule(corpus, tok, batch_size=32, eval_batch_size=5)


def make_task(corpus, tok, seed=0, d_model=16, **optim) -> TranslationTask:
    torch.manual_seed(seed)
    model = make_transformer(
        tok.vocab_size,
        tok.pad_id,
        d_model=d_model,
        num_heads=HEADS,
        encoder_layers=LAYERS,
        decoder_layers=LAYERS,
        ffn_dim=2 * d_model,
        dropout=0.0,
    )
    return TranslationTask(model, tok, corpus.eval_splits, OptimSettings(**optim))


def trainer(callbacks=(), logger=False, root=None, **kwargs) -> L.Trainer:
    return L.Trainer(
        default_root_dir=None if root is None else str(root),
        accelerator="cpu",
        devices=1,
        logger=logger,
        callbacks=list(callbacks),
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
        **kwargs,
    )


def zero_gates(model) -> int:
    return sum(int((g == 0).sum()) for g in head_gates(model).values())


@pytest.fixture(scope="module")
def data():
    return make_data()


@pytest.fixture(scope="module")
def runs(data, tmp_path_factory):
    """A briefly trained model tested twice: plain, then with the callback (its decodes spied on)."""
    corpus, tok, dm = data
    task = make_task(corpus, tok, lr=3e-3, warmup_steps=30)
    trainer(max_steps=60, limit_val_batches=0).fit(task, datamodule=dm)
    plain_metrics = trainer().test(task, datamodule=dm, verbose=False)[0]
    plain_hypotheses = dict(task.hypotheses)

    out = tmp_path_factory.mktemp("pruning")
    decodes, real_translate = [], task.translate

    def spy(batches):
        zeros = zero_gates(task.model)
        hyps, refs = real_translate(batches)
        decodes.append((zeros, hyps))
        return hyps, refs

    task.translate = spy
    callback = HeadPruning(FRACTIONS)
    logger = CSVLogger(out, name="csv")
    metrics = trainer([callback], logger, root=out).test(task, datamodule=dm, verbose=False)[0]
    return SimpleNamespace(
        task=task,
        metrics=metrics,
        plain_metrics=plain_metrics,
        plain_hypotheses=plain_hypotheses,
        callback=callback,
        out=out,
        logger=logger,
        decodes=decodes,
    )


def test_the_pruning_order_is_ascending_importance_across_layers():
    importance = {"a": torch.tensor([0.5, 0.1, 0.9]), "b": torch.tensor([0.3, 0.1]), "c": torch.tensor([0.0])}
    order = pruning_order(importance)
    assert order == [("c", 0), ("a", 1), ("b", 1), ("b", 0), ("a", 0), ("a", 2)]  # ties keep layer order
    values = [float(importance[name][h]) for name, h in order]
    assert values == sorted(values)
    assert heads_to_prune(order, 0.5) == order[:3] and heads_to_prune(order, 0.0) == []


def test_normalising_by_layer_gives_each_layer_unit_l2_norm_and_can_reorder_heads_across_layers():
    importance = {
        "loud": torch.tensor([30.0, 40.0]),
        "quiet": torch.tensor([0.6, 0.8]),
        "dead": torch.zeros(2),
    }
    normalised = normalise_by_layer(importance)
    assert torch.allclose(normalised["loud"], torch.tensor([0.6, 0.8]))
    assert torch.allclose(normalised["quiet"], torch.tensor([0.6, 0.8]))
    assert torch.equal(normalised["dead"], torch.zeros(2))
    assert pruning_order(importance)[2:4] == [("quiet", 0), ("quiet", 1)]  # raw: the quiet layer goes first
    assert pruning_order(normalised)[2:4] == [("loud", 0), ("quiet", 0)]  # normalised: head by head


@pytest.mark.parametrize(
    "total,fraction,count", [(24, 0.2, 5), (24, 0.4, 10), (5, 0.5, 3), (10, 0.6, 6), (4, 1.0, 4)]
)
def test_a_fraction_prunes_round_p_times_n_heads_with_halves_rounded_up(total, fraction, count):
    assert pruned_count(total, fraction) == count


def test_prune_heads_zeroes_exactly_the_named_gates_and_restores_every_gate_even_after_an_error(data):
    task = make_task(*data[:2])
    gates = head_gates(task.model)
    assert len(gates) == 3 * LAYERS and all(torch.equal(g, torch.ones(HEADS)) for g in gates.values())
    heads = [
        ("encoder.layers.0.self_attn", 1),
        ("decoder.layers.1.cross_attn", 0),
        ("decoder.layers.1.cross_attn", 3),
    ]
    with pytest.raises(RuntimeError, match="boom"), prune_heads(task.model, heads):
        assert zero_gates(task.model) == 3
        assert gates["decoder.layers.1.cross_attn"].tolist() == [0.0, 1.0, 1.0, 0.0]
        raise RuntimeError("boom")
    assert all(torch.equal(g, torch.ones(HEADS)) and not g.requires_grad for g in gates.values())


def test_prune_heads_refuses_a_layer_or_head_the_model_does_not_have(data):
    model = make_task(*data[:2]).model
    with pytest.raises(ValueError, match="no attention layer 'decoder.layers.9.cross_attn'"):
        with prune_heads(model, [("decoder.layers.9.cross_attn", 0)]):
            pass
    with pytest.raises(ValueError, match=r"head 4 of 'encoder.layers.0.self_attn' does not exist: it has 4"):
        with prune_heads(model, [("encoder.layers.0.self_attn", 4)]):
            pass
    assert zero_gates(model) == 0


def test_pruning_every_head_of_a_layer_still_gives_finite_output_that_differs(data):
    corpus, tok, dm = data
    model = make_task(corpus, tok).model.eval()
    batch = next(iter(dm.eval_dataloader("test")))
    src, tgt = batch["src"], batch["tgt"][:, :-1]
    with torch.no_grad():
        full = model(src, tgt)
        with prune_heads(model, [("decoder.layers.0.cross_attn", h) for h in range(HEADS)]):
            pruned = model(src, tgt)
    assert torch.isfinite(pruned).all() and not torch.allclose(full, pruned)
    with torch.no_grad():
        assert torch.equal(model(src, tgt), full)


def test_pruning_nothing_reproduces_the_unpruned_test_bleu_exactly(runs):
    assert runs.metrics["test/bleu"] > 0.0
    bleu = runs.callback.metrics["test/bleu_pruned_0"]
    assert torch.tensor(bleu).float().item() == runs.metrics["test/bleu"]  # Lightning logs float32
    zeros, hyps = runs.decodes[0]
    assert zeros == 0 and hyps == runs.task.hypotheses["test"]


def test_the_callback_logs_bleu_per_fraction_and_writes_head_importance_json(runs):
    pruned = [f"test/bleu_pruned_{pct}" for pct in ("0", "20", "40", "60", "80")]
    kept = [f"test/bleu_kept_{pct}" for pct in ("20", "40", "60", "80")]
    metrics = runs.callback.metrics
    assert list(metrics) == pruned + kept and runs.callback.final_metrics() == metrics
    assert all(0.0 <= metrics[k] <= 100.0 for k in pruned)
    for pct in ("20", "40", "60", "80"):  # the share of the unpruned BLEU kept
        assert metrics[f"test/bleu_kept_{pct}"] == pytest.approx(
            metrics[f"test/bleu_pruned_{pct}"] / metrics["test/bleu_pruned_0"]
        )
    with open(runs.logger.experiment.metrics_file_path) as f:
        logged = {k: float(v) for row in csv.DictReader(f) for k, v in row.items() if k in metrics and v}
    assert logged == pytest.approx(metrics)

    record = json.loads(RunDir(runs.out).head_importance.read_text())
    total = 3 * LAYERS * HEADS
    assert record["num_heads"] == total and len(record["order"]) == total
    assert set(record["layers"]) == set(head_gates(runs.task.model))
    for layer in record["layers"].values():
        assert torch.tensor(layer["importance"]).norm().item() == pytest.approx(1.0, abs=1e-5)
        assert all(v >= 0 for v in layer["raw"])
    ranked = [record["layers"][name]["importance"][h] for name, h in record["order"]]
    assert ranked == sorted(ranked)
    assert [row["heads_pruned"] for row in record["fractions"]] == [0, 5, 10, 14, 19]
    for row in record["fractions"]:
        assert row["pruned"] == record["order"][: row["heads_pruned"]]
        assert row["bleu"] == runs.callback.metrics[f"test/bleu_pruned_{percent_label(row['fraction'])}"]
    assert record["sacrebleu"].startswith("nrefs:1|")


def test_each_decode_prunes_its_share_of_heads_and_every_gate_is_one_again_after(runs):
    assert [zeros for zeros, _ in runs.decodes] == [0, 5, 10, 14, 19]
    assert zero_gates(runs.task.model) == 0
    assert all(torch.equal(g, torch.ones(HEADS)) for g in head_gates(runs.task.model).values())


def test_removing_heads_changes_the_translations(runs):
    unpruned, most_pruned = runs.decodes[0][1], runs.decodes[-1][1]
    assert unpruned != most_pruned


def test_the_task_metrics_and_hypotheses_are_those_of_a_run_without_the_callback(runs):
    def quality(metrics):
        return {k: v for k, v in metrics.items() if "decode_" not in k}  # speed varies run to run

    assert quality(runs.metrics) == quality(runs.plain_metrics)
    assert runs.task.hypotheses == runs.plain_hypotheses
    assert not any("pruned" in k for k in runs.metrics)


def test_the_callback_only_runs_on_global_rank_zero(data, tmp_path):
    callback = HeadPruning()
    module = SimpleNamespace(model=None)
    other_rank = SimpleNamespace(
        is_global_zero=False, datamodule=data[2], loggers=[], default_root_dir=tmp_path
    )
    callback.on_test_end(other_rank, module)
    assert callback.final_metrics() == {} and not RunDir(tmp_path).head_importance.exists()


@pytest.mark.parametrize(
    "fractions,message",
    [
        ([], "in \\[0, 1\\]"),
        ([0.2, 1.5], "in \\[0, 1\\]"),
        ([-0.1], "in \\[0, 1\\]"),
        ([0.2, 0.2], "repeated"),
    ],
)
def test_bad_fractions_are_refused_with_the_config_key(fractions, message, tmp_path):
    with pytest.raises(ValueError, match=f"diagnostics.prune_fractions .*{message}"):
        HeadPruning(fractions)


@pytest.mark.slow
def test_bleu_of_a_trained_model_falls_as_most_of_its_heads_are_pruned(tmp_path):
    """About a minute on one core; measured BLEU 78 unpruned, 77 / 59 / 18 / 2 at 20 / 40 / 60 / 80 %."""
    corpus, tok, dm = make_data(train_size=2000, valid_size=40, test_size=60, test_long_size=3)
    task = make_task(corpus, tok, d_model=64, lr=3e-3, warmup_steps=100)
    trainer(max_steps=800, limit_val_batches=0).fit(task, datamodule=dm)
    callback = HeadPruning([0.0, 0.2, 0.8])
    metrics = trainer([callback], root=tmp_path).test(task, datamodule=dm, verbose=False)[0]
    bleu = callback.metrics
    assert torch.tensor(bleu["test/bleu_pruned_0"]).float().item() == metrics["test/bleu"] > 50.0
    assert bleu["test/bleu_pruned_0"] >= bleu["test/bleu_pruned_20"] > bleu["test/bleu_pruned_80"] + 20.0


def test_attnlab_train_with_head_pruning_records_bleu_per_fraction_in_results_json(trained_run):
    metrics = results_of(trained_run)["metrics"]
    for pct in ("0", "20", "40", "60", "80"):
        assert 0.0 <= metrics[f"test/bleu_pruned_{pct}"] <= 100.0
    assert metrics["test/decode_tokens_per_s"] > 0 and metrics["test_long/decode_ms_per_sentence"] > 0
    record = json.loads(RunDir(trained_run / "run").head_importance.read_text())
    assert [row["fraction"] for row in record["fractions"]] == [0.0, 0.2, 0.4, 0.6, 0.8]
    assert record["fractions"][2]["bleu"] == metrics["test/bleu_pruned_40"]
