"""The variant contracts: every option of a variant group is a class named after its file on the group's
base, and a new variant is one ``.py`` plus one ``.yaml`` that the tests, the sweep presets and the
experiments pick up with no other edit (checked in a scratch copy of the project)."""

from __future__ import annotations

import importlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hydra.utils import get_object
from omegaconf import OmegaConf

from attnlab.attention.patterns.base import MaskPattern
from attnlab.attention.scores.base import Score
from attnlab.config import CONF_DIR
from attnlab.data.tokenizers import load_tokenizer
from attnlab.data.tokenizers.base import SPECIAL_IDS, Tokenizer
from attnlab.posenc.base import PositionalEncoding

from conftest import config_options

ROOT = Path(__file__).parents[1]
# group -> (package of its classes, class-name suffix, base class, built by the model from a _partial_)
VARIANT_GROUPS = {
    "attention/score": ("attnlab.attention.scores", "Score", Score, True),
    "attention/mask": ("attnlab.attention.patterns", "Pattern", MaskPattern, False),
    "posenc": ("attnlab.posenc", "Positions", PositionalEncoding, True),
}
OPTIONS = [(group, option) for group in VARIANT_GROUPS for option in config_options(group)]


def camel(stem: str) -> str:
    return "".join(part.capitalize() for part in stem.split("_"))


@pytest.mark.parametrize("group,option", OPTIONS, ids=[f"{g}={o}" for g, o in OPTIONS])
def test_every_option_is_the_class_named_after_its_file_on_the_groups_base(group, option):
    package, suffix, base, partial = VARIANT_GROUPS[group]
    cfg = OmegaConf.load(Path(CONF_DIR) / group / f"{option}.yaml")
    assert cfg._target_ == f"{package}.{option}.{camel(option)}{suffix}"
    assert issubclass(get_object(cfg._target_), base)
    assert cfg.get("_partial_", False) is partial
    module = importlib.import_module(f"{package}.{option}")
    assert (module.__doc__ or "").strip(), "the module opens with its equation and paper"


def test_every_class_of_a_variant_package_has_its_yaml():
    for group, (package, *_) in VARIANT_GROUPS.items():
        folder = Path(importlib.import_module(package).__file__).parent
        modules = {p.stem for p in folder.glob("*.py") if not p.stem.startswith("_")} - {"base"}
        assert modules == set(config_options(group)), group


@pytest.mark.parametrize("option", config_options("data/tokenizer"))
def test_every_tokenizer_keeps_the_special_ids_and_round_trips_through_its_folder(option, tmp_path):
    cfg = OmegaConf.load(Path(CONF_DIR) / "data" / "tokenizer" / f"{option}.yaml")
    cfg.pop("cache_dir", None)
    sentences = [f"the cat {i} sees the dog {i % 7}" for i in range(200)]
    trainer = get_object(cfg._target_)
    kwargs = {k: v for k, v in OmegaConf.to_container(cfg).items() if not k.startswith("_")}
    if "vocab_size" in kwargs:
        kwargs["vocab_size"] = 60
    tokenizer = trainer(sentences, **kwargs)
    assert isinstance(tokenizer, Tokenizer) and tokenizer.special_ids == SPECIAL_IDS
    ids = tokenizer.encode(sentences[3])
    assert tokenizer.decode([tokenizer.bos_id, *ids, tokenizer.eos_id, 5, tokenizer.pad_id]) == sentences[3]
    loaded = load_tokenizer(tokenizer.save(tmp_path / "tok"))
    assert type(loaded) is type(tokenizer) and loaded.encode(sentences[3]) == ids
    assert loaded.vocab_size == tokenizer.vocab_size and loaded.tokens(ids) == tokenizer.tokens(ids)


NEW = "scaled_dot_copy"


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    """A scratch copy of the project with one new score: ``scaled_dot.py`` copied to a new name (its
    class renamed after the file) and its YAML, and no other edit."""
    copy = tmp_path_factory.mktemp("scratch") / "attnlab"
    skip = shutil.ignore_patterns("__pycache__", "*.egg-info", "outputs")
    for part in ("src", "conf", "tests", "experiments"):
        shutil.copytree(ROOT / part, copy / part, ignore=skip)
    shutil.copy(ROOT / "pyproject.toml", copy / "pyproject.toml")
    scores = copy / "src" / "attnlab" / "attention" / "scores"
    code = (scores / "scaled_dot.py").read_text().replace("ScaledDotScore", f"{camel(NEW)}Score")
    (scores / f"{NEW}.py").write_text(code)
    conf = copy / "conf" / "attention" / "score"
    text = (conf / "scaled_dot.yaml").read_text()
    text = text.replace("scaled_dot.ScaledDotScore", f"{NEW}.{camel(NEW)}Score").replace(
        "=scaled_dot", f"={NEW}"
    )
    (conf / f"{NEW}.yaml").write_text(text)
    return copy


def run_in(copy: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(copy / "src")}  # the copy's attnlab, not the installed one
    env.pop("HYDRA_FULL_ERROR", None)
    return subprocess.run(
        [sys.executable, *args], cwd=copy, env=env, capture_output=True, text=True, timeout=600
    )


def test_a_new_score_file_and_yaml_are_picked_up_by_the_parametrised_tests(scratch):
    files = ["test_variants.py", "test_scores.py", "test_configs.py", "test_combinations.py"]
    pytest = ["-m", "pytest", "-v", "-p", "no:cacheprovider", "-k", NEW]
    proc = run_in(scratch, *pytest, *[f"tests/{f}" for f in files])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    passed = re.findall(rf"^tests/(test_\w+\.py)::\S*{NEW}\S* PASSED", proc.stdout, flags=re.MULTILINE)
    assert set(passed) == set(files), proc.stdout[-3000:]  # every file ran tests of the new score
    assert len(passed) >= 15


def test_a_new_score_joins_the_scores_sweep_preset_of_the_copy(scratch):
    code = (
        "import attnlab, attnlab.config as c\n"
        "from hydra import compose, initialize_config_dir\n"
        "from omegaconf import OmegaConf\n"
        "with initialize_config_dir(config_dir=c.CONF_DIR, version_base='1.3'):\n"
        "    cfg = compose('train', overrides=['sweep=scores'], return_hydra_config=True)\n"
        "print(c.CONF_DIR)\n"
        "print(OmegaConf.to_container(cfg.hydra.sweeper.params, resolve=True)['attention/score'])\n"
    )
    proc = run_in(scratch, "-c", code)
    assert proc.returncode == 0, proc.stderr[-2000:]
    conf_dir, values = proc.stdout.strip().splitlines()
    assert Path(conf_dir) == scratch / "conf"
    assert values.split(",")[0] == "scaled_dot" and NEW in values.split(",")
