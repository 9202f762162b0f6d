"""One-line error messages for the command line: the problem and what to do, no traceback."""

from __future__ import annotations

import re

_UNEXPECTED_KWARG = re.compile(r"unexpected keyword argument '(\w+)'")


def one_line(err: BaseException) -> str:
    """Condenses an exception (Hydra, OmegaConf, ours) into one actionable line."""
    from hydra.errors import ConfigCompositionException, InstantiationException, MissingConfigException

    if isinstance(err, MissingConfigException) and err.options:
        path = (err.missing_cfg_file or "").strip("/")
        group, _, name = path.rpartition("/")
        if group:
            return f"{group}={name}: no such option; choose one of: {', '.join(sorted(err.options))}"
    if isinstance(err, ConfigCompositionException):
        match = re.search(r"Could not override '([^']+)'", str(err))
        if match and "not in struct" in str(err.__cause__ or ""):
            key = match.group(1)
            return (
                f"unknown config key '{key}': check its spelling (`attnlab-train --cfg job` lists the keys)"
            )
    if isinstance(err, InstantiationException):
        cause = err.__cause__
        full_key = re.search(r"full_key: ([\w.]+)", str(err))
        if cause is not None:
            bad = _UNEXPECTED_KWARG.search(str(cause))
            if bad and full_key:
                return f"unknown config key '{full_key.group(1)}.{bad.group(1)}': check its spelling"
            return one_line(cause)
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    lines = [ln for ln in lines if not ln.startswith(("full_key:", "object_type=", "Set the environment"))]
    text = "; ".join(lines) or type(err).__name__
    plain = isinstance(err, ValueError) or type(err).__name__ == "SweepFailed"
    return text if plain else f"{type(err).__name__}: {text}"


_TRACEBACK = "ATTNLAB_TRACEBACK"


def exit_with_error(prog: str, err: Exception) -> None:
    """From inside a Hydra job: print ``<prog>: error: …`` and exit 2 (re-raise to show a traceback).

    Exiting here rather than raising keeps Hydra from adding its own "Error executing job" line.
    """
    import os
    import sys

    if os.environ.get(_TRACEBACK) == "1":
        raise err
    print(f"{prog}: error: {one_line(err)}", file=sys.stderr)
    sys.exit(2)


def run_cli(hydra_main, prog: str) -> None:
    """Runs a ``@hydra.main`` function; any error becomes one line ``<prog>: error: …`` and exit 2.

    ``HYDRA_FULL_ERROR=1`` in the caller's environment shows the full traceback instead.
    """
    import os
    import sys

    show_traceback = os.environ.get("HYDRA_FULL_ERROR") == "1"
    if show_traceback:
        os.environ[_TRACEBACK] = "1"
    os.environ["HYDRA_FULL_ERROR"] = "1"  # let errors reach us instead of Hydra's multi-line printer
    try:
        hydra_main()
    except Exception as err:
        if show_traceback:
            raise
        print(f"{prog}: error: {one_line(err)}", file=sys.stderr)
        sys.exit(2)
