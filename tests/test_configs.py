"""Every option of every config group composes and builds; a new YAML is tested without edits here."""

from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir

from attnlab.train import CONF_DIR, build_model

GROUPS = ["attention/score", "attention/mask", "posenc", "model", "data", "logger", "trainer"]
OPTIONS = [(g, p.stem) for g in GROUPS for p in sorted((Path(CONF_DIR) / g).glob("*.yaml"))]


def compose_train(*overrides: str):
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        return compose("train", overrides=list(overrides))


def test_every_yaml_starts_with_a_comment_saying_what_it_is():
    for path in Path(CONF_DIR).rglob("*.yaml"):
        assert path.read_text().startswith("# "), path


@pytest.mark.parametrize("group,option", OPTIONS, ids=[f"{g}={o}" for g, o in OPTIONS])
def test_every_config_option_composes(group, option):
    cfg = compose_train(f"{group}={option}")
    assert cfg is not None


MODEL_OPTIONS = [(g, o) for g, o in OPTIONS if g in ("attention/score", "attention/mask", "posenc", "model")]


@pytest.mark.parametrize("key_dim", [None, 6], ids=["key_dim=null", "key_dim=6"])
@pytest.mark.parametrize("group,option", MODEL_OPTIONS, ids=[f"{g}={o}" for g, o in MODEL_OPTIONS])
def test_every_model_option_builds_and_gives_finite_logits(group, option, key_dim):
    overrides = [f"{group}={option}"]
    if group != "model":
        overrides += ["model.d_model=32", "model.ffn_dim=64"]
    if key_dim is not None:  # queries and keys narrower than values (Vaswani et al. 2017, Table 3 B)
        overrides.append(f"model.key_dim={key_dim}")
    model = build_model(compose_train(*overrides), vocab_size=50, pad_id=0).eval()
    src, tgt = torch.randint(4, 50, (2, 7)), torch.randint(4, 50, (2, 5))
    logits = model(src, tgt)
    assert logits.shape == (2, 5, 50) and torch.isfinite(logits).all()
