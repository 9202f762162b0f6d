"""results.json says where its numbers come from: commit, machine, versions, time."""

import re
from datetime import datetime

from attnlab.results import read_results, write_results


def test_results_record_the_commit_machine_and_versions_of_the_run(tmp_path):
    write_results(
        tmp_path, "completed", None, {"posenc": "rope"}, ["posenc=rope"], 0, {"test/bleu": 1.0}, None
    )
    env = read_results(tmp_path)["env"]
    assert re.fullmatch(r"[0-9a-f]{40}", env["commit"])  # the tests run from a git checkout
    assert isinstance(env["dirty"], bool)
    assert env["cpus"] >= 1 and env["device"] and env["host"]  # "cpu" or the GPU's name
    assert env["torch"].startswith("2.") and env["lightning"].startswith("2.")
    assert datetime.fromisoformat(env["finished"].replace("Z", "+00:00")).tzinfo is not None
