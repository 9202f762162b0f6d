"""Many run directories into one comparison: variants, mean ± 95 % CI over seeds, significance against a
baseline, paper numbers, text, plots and an HTML report (the library behind ``attnlab-compare``).

    from attnlab.compare import compare, load_runs, to_markdown

    result = compare(load_runs(["outputs/multirun/…"]), by=["posenc"], metric="test_long/bleu")
    print(to_markdown(result))

Modules, each importing only those before it: ``runs`` (reading run directories), ``stats``,
``comparison`` (variants, ranking, significance), ``paper`` (expected.yaml), ``text`` (markdown, CSV,
README), ``plots``, ``html``. Nothing here imports torch or Lightning.
"""

from attnlab.compare.comparison import Comparison, Variant, compare
from attnlab.compare.runs import Run, load_runs
from attnlab.compare.text import to_markdown

__all__ = ["Comparison", "Run", "Variant", "compare", "load_runs", "to_markdown"]
