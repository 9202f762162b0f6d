"""Where and with what a run was made: commit, machine, library versions, time. Kept in ``results.json``.

    {"commit": "d29859c…", "dirty": false, "host": "…", "platform": "Linux-6.1-x86_64", "cpus": 2,
     "device": "cpu", "python": "3.11.7", "torch": "2.13.0", "lightning": "2.6.6", "finished": "2026-…Z"}

The commit is that of the source tree the package runs from (an editable install or a checkout);
``null`` for an installed wheel. ``dirty`` says whether tracked files differed from that commit.
"""

from __future__ import annotations

import os
import platform
import socket
import subprocess
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(Path(__file__).resolve().parent), *args],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def device_name() -> str:
    import sys

    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        return torch.cuda.get_device_name()
    return "cpu"


def provenance() -> dict:
    """The commit, machine and versions of this process (see the module docstring)."""
    commit = _git("rev-parse", "HEAD")
    status = _git("status", "--porcelain", "--untracked-files=no") if commit else None
    return {
        "commit": commit,
        "dirty": bool(status) if status is not None else None,
        "host": socket.gethostname(),
        "platform": platform.platform(terse=True),
        "cpus": os.cpu_count(),
        "device": device_name(),
        "python": platform.python_version(),
        "torch": _version("torch"),
        "lightning": _version("lightning"),
        "finished": datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z"),
    }
