"""The attention-map and attention-stats callbacks, driven directly and through a real wandb run."""

from types import SimpleNamespace

import pytest
import torch
import wandb

import attnlab.training.callbacks.attention_maps as attention_maps
from attnlab.analysis.diagnostics import attention_entropy
from attnlab.attention.recording import record_attention
from attnlab.data.datamodule import TranslationDataModule
from attnlab.data.synthetic import generate
from attnlab.data.tokenizers.word import WordTokenizer
from attnlab.rundir.wandb_offline import read_run
from attnlab.training.callbacks.attention_maps import AttentionMaps, default_probes
from attnlab.training.callbacks.attention_stats import AttentionStats
from attnlab.training.decode import DecodeSettings

from conftest import make_transformer

HEADS, LAYERS = 2, 2


class StubLogger:
    def __init__(self):
        self.images, self.metrics = [], {}

    def log_image(self, key, images, step=None, **kwargs):
        self.images.append((key, list(images), step, kwargs))


@pytest.fixture(scope="module")
def setup():
    corpus = generate(train_size=60, valid_size=10, test_size=12, test_long_size=3)
    pairs = corpus.splits["train"]
    tok = WordTokenizer.train([p.src for p in pairs] + [p.tgt for p in pairs])
    torch.manual_seed(0)
    model = make_transformer(
        tok.vocab_size,
        tok.pad_id,
        d_model=16,
        num_heads=HEADS,
        ffn_dim=32,
        dropout=0.0,
    ).eval()
    data = TranslationDataModule(corpus, tok, batch_size=8, eval_batch_size=5)
    module = SimpleNamespace(
        model=model, device=torch.device("cpu"), logged={}, tokenizer=tok, decode_settings=DecodeSettings()
    )
    module.log_dict = module.logged.update
    return corpus, tok, data, module


def trainer_of(data, run_dir, loggers=(), global_step=0, is_global_zero=True):
    """What the callbacks read of a Lightning trainer."""
    return SimpleNamespace(
        datamodule=data,
        default_root_dir=str(run_dir),
        loggers=list(loggers),
        global_step=global_step,
        is_global_zero=is_global_zero,
        sanity_checking=False,
    )


def ready(callback, trainer, module):
    callback.setup(trainer, module, "fit")
    return callback


def test_default_probes_are_validation_sentences_of_different_lengths(setup):
    corpus = setup[0]
    probes = default_probes(corpus.splits["valid"], 3)
    lengths = [len(p.split()) for p in probes]
    assert len(probes) == 3 and lengths == sorted(lengths) and lengths[0] < lengths[-1]


def test_the_map_callback_logs_one_image_per_site_and_layer_with_a_panel_per_head(
    setup, tmp_path, monkeypatch
):
    corpus, tok, data, module = setup
    panels = []
    real_image = attention_maps.attention_image

    def counting_image(p, **kwargs):
        drawing = real_image(p, **kwargs)
        panels.append(len(drawing.panels))
        return drawing

    monkeypatch.setattr(attention_maps, "attention_image", counting_image)
    logger = StubLogger()
    trainer = trainer_of(data, tmp_path, [logger], global_step=7)
    callback = ready(AttentionMaps(probes=[corpus.splits["valid"][0].src]), trainer, module)
    paths = callback.draw(trainer, module, "step000007")
    keys = {
        f"attention/{site}/L{layer}" for site in ("encoder", "decoder", "cross") for layer in range(LAYERS)
    }
    assert {key for key, *_ in logger.images} == keys and len(logger.images) == len(keys)
    assert all(len(images) == 1 and step == 7 for _, images, step, _ in logger.images)
    assert all("→" in kwargs["caption"][0] for *_, kwargs in logger.images)
    assert panels == [HEADS] * len(keys)
    assert sorted(p.name for p in paths) == sorted(
        f"{site}_L{layer}_probe0.png" for site in ("encoder", "decoder", "cross") for layer in range(LAYERS)
    )
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in paths)
    assert {p.parent for p in paths} == {tmp_path / "attention" / "step000007"}


def test_probes_of_different_lengths_reach_the_logger_as_images_of_one_size(setup, tmp_path):
    corpus, tok, data, module = setup
    logger = StubLogger()
    trainer = trainer_of(data, tmp_path, [logger])
    callback = ready(AttentionMaps(num_probes=2), trainer, module)
    paths = callback.draw(trainer, module, "test")
    from PIL import Image

    drawn = {Image.open(p).size for p in paths if p.name.startswith("cross_L0")}
    assert len(drawn) == 2  # the PNGs keep their own sizes
    for _, images, _, _ in logger.images:
        assert len(images) == 2 and len({i.size for i in images}) == 1  # one size per wandb panel
        assert images[0].size == tuple(max(d) for d in zip(*(i.size for i in images)))


def test_without_an_image_logger_the_pngs_are_still_saved_for_the_default_probes(setup, tmp_path):
    corpus, tok, data, module = setup
    trainer = trainer_of(data, tmp_path)
    callback = ready(AttentionMaps(num_probes=2), trainer, module)
    assert callback.probes == default_probes(corpus.splits["valid"], 2)
    paths = callback.draw(trainer, module, "test")
    assert len(paths) == 2 * 3 * LAYERS and all(p.is_file() for p in paths)


def test_the_map_callback_logs_images_into_a_real_offline_wandb_run(setup, tmp_path):
    from lightning.pytorch.loggers import WandbLogger

    corpus, tok, data, module = setup
    run = wandb.init(mode="offline", dir=str(tmp_path), project="t", name="maps")
    logger = WandbLogger(experiment=run, save_dir=str(tmp_path))
    trainer = trainer_of(data, tmp_path, [logger], global_step=3)
    ready(AttentionMaps(probes=[corpus.splits["valid"][0].src]), trainer, module).draw(
        trainer, module, "test"
    )
    run.finish()
    [run_dir] = (tmp_path / "wandb").glob("offline-run-*")
    history = read_run(run_dir, wait=30)["history"]
    logged = {k: v for row in history for k, v in row.items() if k.startswith("attention/")}
    assert set(logged) == {
        f"attention/{s}/L{layer}" for s in ("encoder", "decoder", "cross") for layer in range(LAYERS)
    }
    assert all(v["_type"] == "images/separated" and v["count"] == 1 for v in logged.values())
    assert len(list((run_dir / "files" / "media" / "images").rglob("*.png"))) == len(logged)


def test_the_stats_callback_reports_entropy_per_head_and_aer_against_gold(setup, tmp_path):
    corpus, tok, data, module = setup
    logger = StubLogger()
    callback = AttentionStats(split="test")
    callback.on_test_epoch_end(trainer_of(data, tmp_path, [logger], global_step=5), module)
    m = module.logged
    for site in ("encoder", "decoder", "cross"):
        assert f"test/entropy/{site}" in m and f"test/max_weight/{site}" in m
        assert all(f"test/entropy/{site}/L{layer}H{h}" in m for layer in range(LAYERS) for h in range(HEADS))
    assert 0.0 <= m["test/aer"] <= m["test/aer_mean"] <= 1.0
    assert m["test/aer"] == min(m[f"test/aer/L{layer}H{h}"] for layer in range(LAYERS) for h in range(HEADS))
    # entropy of encoder layer 0 equals a direct computation over all test sentences at once
    batch = data.collate([data.splits["test"][i] for i in range(len(data.splits["test"]))])
    with record_attention(module.model) as maps, torch.no_grad():
        module.model(batch["src"], batch["tgt"][:, :-1])
    direct = attention_entropy(maps[("encoder", 0)], batch["src"] != tok.pad_id)
    assert [m[f"test/entropy/encoder/L0H{h}"] for h in range(HEADS)] == pytest.approx(
        direct.tolist(), abs=1e-5
    )
    assert {key for key, *_ in logger.images} == {
        f"attention/entropy/{s}" for s in ("encoder", "decoder", "cross")
    }
    assert (tmp_path / "attention" / "test" / "entropy_cross.png").is_file()


def test_under_ddp_only_global_rank_0_draws_maps_and_computes_head_statistics(setup, tmp_path):
    corpus, tok, data, module = setup
    logger, logged = StubLogger(), {}
    other_rank = trainer_of(data, tmp_path, [logger], global_step=5, is_global_zero=False)
    rank_1 = SimpleNamespace(**{**vars(module), "log_dict": logged.update})
    maps = ready(AttentionMaps(probes=[corpus.splits["valid"][0].src]), other_rank, rank_1)
    maps.on_test_epoch_end(other_rank, rank_1)
    stats = AttentionStats(split="test")
    stats.on_test_epoch_end(other_rank, rank_1)
    assert not list(tmp_path.rglob("*")) and not logger.images and not logged and not stats.metrics
