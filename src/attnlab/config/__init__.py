"""The config tree (``conf/``): where it lives, and the OmegaConf resolvers its YAML uses.

``CONF_DIR`` is ``attnlab/conf`` inside an installed wheel, else the repository's ``conf/`` (an editable
install or a checkout). Everything that composes configs (the CLIs, the tests) takes it from here.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parents[1]  # .../attnlab
CONF_DIR = next(str(p) for p in (_PACKAGE / "conf", _PACKAGE.parents[1] / "conf") if p.is_dir())


def group_options(group: str) -> list[str]:
    """The options of a config group, from its folder, sorted: ``group_options("posenc")``."""
    folder = Path(CONF_DIR) / group
    if not folder.is_dir():
        raise ValueError(f"no config group '{group}' in {CONF_DIR}")
    return sorted(p.stem for p in folder.glob("*.yaml"))
