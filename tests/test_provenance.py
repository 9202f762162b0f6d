"""results.json says where its numbers come from: commit, machine, versions, time."""

import re
from datetime import datetime

from attnlab.rundir import RunDir


def test_results_record_the_commit_machine_and_versions_of_the_run(tmp_path):
    run = RunDir(tmp_path)
    run.write_results(
        status="completed",
        error=None,
        choices={"posenc": "rope"},
        overrides=["posenc=rope"],
        seed=0,
        metrics={"test/bleu": 1.0},
        sacrebleu=None,
    )
    env = run.read_results()["env"]
    assert re.fullmatch(r"[0-9a-f]{40}", env["commit"])  # the tests run from a git checkout
    assert isinstance(env["dirty"], bool)
    assert env["cpus"] >= 1 and env["device"] and env["host"]  # "cpu" or the GPU's name
    assert env["torch"].startswith("2.") and env["lightning"].startswith("2.")
    assert datetime.fromisoformat(env["finished"].replace("Z", "+00:00")).tzinfo is not None
