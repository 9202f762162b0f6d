"""OmegaConf resolvers the configs use, registered when ``attnlab`` is imported (so ``attnlab-train``,
``attnlab-eval`` and tests that compose the configs all have them):

- ``${div:${model.d_model},16}``: integer division that must be exact (a key size of d_model / 16);
- ``${not:${quiet}}``: boolean negation (the progress bar is on when the run is not quiet);
- ``${options:attention/score,scaled_dot}``: every option of a config group as a sweep value,
  ``scaled_dot,additive,cosine,…``: the named ones first (so job 0, which ``attnlab-compare`` takes as
  the default baseline, is the default option), then the rest in name order. A sweep preset written
  this way takes in a new option (one more YAML in the group) without an edit.
"""

from __future__ import annotations

from omegaconf import OmegaConf


def div(a: int, b: int) -> int:
    """``a // b`` for sizes that must divide exactly, e.g. a key size of d_model / 16."""
    a, b = int(a), int(b)
    if b <= 0 or a % b:
        raise ValueError(f"${{div:{a},{b}}}: {b} must be a positive divisor of {a}")
    return a // b


def negate(value: bool) -> bool:
    """``not value`` for a boolean key."""
    if not isinstance(value, bool):
        raise ValueError(f"${{not:{value}}}: needs true or false, got {value!r}")
    return not value


def options(group: str, *first: str) -> str:
    """Every option of ``group`` joined by commas, ``first`` leading (see the module docstring)."""
    from attnlab.config import group_options

    names = group_options(group)
    unknown = [name for name in first if name not in names]
    if unknown:
        raise ValueError(f"${{options:{group},…}}: {unknown} not among the options of {group}: {names}")
    return ",".join([*first, *(name for name in names if name not in first)])


def register() -> None:
    OmegaConf.register_new_resolver("div", div, replace=True)
    OmegaConf.register_new_resolver("not", negate, replace=True)
    OmegaConf.register_new_resolver("options", options, replace=True)
