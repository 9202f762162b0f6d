"""Every option of every config group composes and builds; a new YAML is tested without edits here."""

from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from attnlab.config import CONF_DIR
from attnlab.training.build import build_model

from conftest import compose, compose_fast

NOT_OPTIONS = ("experiment", "sweep", "scale", "variant")  # global overlays, tested in their own files
GROUPS = sorted(
    {
        str(p.parent.relative_to(CONF_DIR))
        for p in Path(CONF_DIR).rglob("*.yaml")
        if p.parent != Path(CONF_DIR) and not str(p.parent.relative_to(CONF_DIR)).startswith(NOT_OPTIONS)
    }
)
OPTIONS = [(g, p.stem) for g in GROUPS for p in sorted((Path(CONF_DIR) / g).glob("*.yaml"))]


def test_every_yaml_starts_with_a_comment_saying_what_it_is():
    for path in Path(CONF_DIR).rglob("*.yaml"):
        assert path.read_text().startswith("# "), path


@pytest.mark.parametrize("group,option", OPTIONS, ids=[f"{g}={o}" for g, o in OPTIONS])
def test_every_config_option_composes_into_the_group_it_names(group, option):
    cfg = compose([f"{group}={option}"], return_hydra_config=True)
    assert cfg.hydra.runtime.choices[group] == option
    own = OmegaConf.load(Path(CONF_DIR) / group / f"{option}.yaml")
    node = OmegaConf.select(cfg, group.replace("/", "."))
    if group == "callbacks":  # a callback file names its own entry
        node = cfg.callbacks
    for key, value in own.items():
        if key == "defaults" or OmegaConf.is_missing(own, key):
            continue
        if OmegaConf.is_interpolation(own, key) or OmegaConf.is_config(value):
            assert key in node, (group, option, key)
        else:
            assert node[key] == value, (group, option, key)


MODEL_OPTIONS = [(g, o) for g, o in OPTIONS if g in ("attention/score", "attention/mask", "posenc", "model")]


@pytest.mark.parametrize("key_dim", [None, 6], ids=["key_dim=null", "key_dim=6"])
@pytest.mark.parametrize("group,option", MODEL_OPTIONS, ids=[f"{g}={o}" for g, o in MODEL_OPTIONS])
def test_every_model_option_builds_and_gives_finite_logits(group, option, key_dim):
    overrides = [f"{group}={option}"]
    if group != "model":
        overrides += ["model.d_model=32", "model.ffn_dim=64"]
    if key_dim is not None:  # queries and keys narrower than values (Vaswani et al. 2017, Table 3 B)
        overrides.append(f"model.key_dim={key_dim}")
    model = build_model(compose_fast(overrides), vocab_size=50, pad_id=0).eval()
    src, tgt = torch.randint(4, 50, (2, 7)), torch.randint(4, 50, (2, 5))
    logits = model(src, tgt)
    assert logits.shape == (2, 5, 50) and torch.isfinite(logits).all()


def test_the_trainer_options_extend_the_default_instead_of_copying_it():
    default = OmegaConf.to_container(compose(["trainer=default"]).trainer)
    changed = {"gpu": {"accelerator": "gpu", "precision": "bf16-mixed"}, "ddp": {"strategy": "ddp"}}
    for option, own in changed.items():
        trainer = OmegaConf.to_container(compose([f"trainer={option}"]).trainer)
        assert {k: v for k, v in trainer.items() if k in own} == own
        kept = set(default) - set(own) - {"devices", "accelerator"}  # ddp sets these for its processes
        assert {k: trainer[k] for k in kept} == {k: default[k] for k in kept}
        text = (Path(CONF_DIR) / "trainer" / f"{option}.yaml").read_text()
        assert "max_steps" not in text and "gradient_clip_val" not in text  # not copied


def test_every_real_data_option_takes_the_one_sentencepiece_tokenizer_block():
    for option in ("files", "multi30k", "iwslt2017", "wmt14"):
        cfg = compose([f"data={option}"], return_hydra_config=True)
        assert cfg.hydra.runtime.choices["data/tokenizer"] == "sentencepiece"
        assert cfg.data.tokenizer._target_.endswith("SentencePieceTokenizer.train")
        assert "_target_" not in (Path(CONF_DIR) / "data" / f"{option}.yaml").read_text().split("corpus:")[0]
        assert "SentencePieceTokenizer" not in (Path(CONF_DIR) / "data" / f"{option}.yaml").read_text()
    assert compose(["data=wmt14"]).data.tokenizer.vocab_size == 32000  # an option may still set its own
