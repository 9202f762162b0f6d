"""Bad configuration stops before training with one line naming the key, and a non-zero exit."""

import pytest

from conftest import TINY, results_of, run_cli

SMALL_DATA = [o for o in TINY if o.startswith("data.corpus.")]

CASES = {
    "unknown group option": (["model=huge"], "model=huge: no such option"),
    "misspelled key": (["model.d_modle=64"], "unknown config key 'model.d_modle'"),
    "misspelled top-level key": (["sed=1"], "unknown config key 'sed'"),
    "added unknown key": (["+model.depth=3"], "unknown config key 'model.depth'"),
    "non-positive model size": (["model.d_model=0"], "model.d_model must be positive"),
    "non-positive layer count": (["model.encoder_layers=-1"], "model.encoder_layers must be positive"),
    "non-positive data size": (["data.corpus.train_size=0"], "data.corpus.train_size must be positive"),
    "non-positive batch size": (["data.batch_size=0"], "data.batch_size must be positive"),
    "heads not dividing d_model": (["model.num_heads=5"], "model.num_heads (5) must divide model.d_model"),
    "kv heads not dividing heads": (
        ["model.num_kv_heads=3"],
        "model.num_kv_heads (3) must be positive and divide model.num_heads (4)",
    ),
    "non-positive head_dim": (["model.head_dim=0"], "model.head_dim must be positive or null"),
    "odd head_dim for rope": (["posenc=rope", "model.head_dim=7"], "model.head_dim"),
    "zero key_dim": (["model.key_dim=0"], "model.key_dim must be positive or null, got 0"),
    "negative key_dim": (["model.key_dim=-8"], "model.key_dim must be positive or null, got -8"),
    "odd key_dim for rope": (["posenc=rope", "model.key_dim=7"], "needs an even model.key_dim, got 7"),
    "key_dim without projections": (
        ["model.projections=false", "model.key_dim=16"],
        "model.projections=false needs model.key_dim (16) = model.head_dim (32)",
    ),
    "non-positive window": (
        ["attention/mask=local", "attention.mask.window=0"],
        "attention.mask.window must be positive",
    ),
    "negative shaw clip": (["posenc=shaw", "posenc.clip=-1"], "posenc.clip must be >= 0"),
    "unknown attention site": (
        ["attention.score_sites=[encoder,crosss]"],
        "attention.score_sites has unknown sites ['crosss']",
    ),
    "unknown lr schedule": (
        ["optim.schedule=step"],
        "optim.schedule must be one of inverse_sqrt, linear, cosine",
    ),
    "annealed schedule of an unbounded run": (
        ["trainer.max_steps=-1", "trainer.max_time=00:00:01:00"],
        "optim.schedule=linear needs the run's length: set trainer.max_steps",
    ),
    "test_long not longer than train": (
        ["data.corpus.long_min_len=10"],
        "data.corpus.long_min_len (10) must exceed data.corpus.max_len",
    ),
}


@pytest.mark.parametrize("overrides,expected", CASES.values(), ids=CASES.keys())
def test_bad_configuration_gives_a_one_line_error_and_a_nonzero_exit(
    train_in_process, tmp_path, overrides, expected
):
    keys = {o.lstrip("+").split("=")[0] for o in overrides}
    small = [o for o in SMALL_DATA if o.split("=")[0] not in keys]  # data is built before the model
    out = train_in_process("quiet=true", "logger=none", *small, *overrides)
    assert out.returncode != 0
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("attnlab-train: error: ") and expected in lines[0]
    assert "Traceback" not in out.stdout + out.stderr
    assert not (tmp_path / "run" / "checkpoints").exists()  # nothing trained


def test_the_console_command_reports_a_config_error_in_one_line_and_records_a_failed_run(tmp_path):
    proc = run_cli(tmp_path, "quiet=true", "model.num_heads=5")
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        f"attnlab-train: error: model.num_heads (5) must divide model.d_model (128): pick a divisor or set "
        f"model.head_dim (run dir: {tmp_path / 'run'})"
    ]
    assert "Traceback" not in proc.stdout
    res = results_of(tmp_path)
    assert res["status"] == "failed" and "model.num_heads (5)" in res["error"]
    assert res["metrics"] == {}
