"""A sweep with a failing job runs the others to completion and reports the failure."""

import json

from conftest import TINY, run_module


def test_a_failing_job_never_sinks_the_sweep_and_the_exit_status_says_so(tmp_path):
    overrides = [o for o in TINY if not o.startswith("trainer.max_steps")] + ["trainer.max_steps=3"]
    proc = run_module(
        "attnlab.train",
        tmp_path,
        "-m",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        *overrides,
        "logger=none",
        "diagnostics.attention_maps=false",
        "model.num_heads=2,5",
        "seed=0,1",
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    errors = [line for line in lines if line.startswith("attnlab-train: error:")]
    assert errors == [lines[-1]] and errors[0].startswith("attnlab-train: error: 2 of 4 jobs failed")
    summary = json.loads((tmp_path / "sweep" / "sweep.json").read_text())
    assert (summary["completed"], summary["failed"], summary["missing"]) == (2, 2, 0)
    by_heads = {}
    for job in summary["jobs"]:
        result = json.loads((tmp_path / "sweep" / job["job"] / "results.json").read_text())
        by_heads.setdefault("model.num_heads=5" in result["overrides"], []).append(result)
    assert all(r["status"] == "completed" and "test/bleu" in r["metrics"] for r in by_heads[False])
    assert all(r["status"] == "failed" and "model.num_heads (5)" in r["error"] for r in by_heads[True])
    assert "sweep: 2 of 4 jobs completed, 2 failed" in proc.stdout
