"""Console entry points, thin: ``attnlab-train`` (``train``), ``attnlab-eval`` (``eval``) and
``attnlab-compare`` (``compare``), with one-line errors (``errors``) and the sweep summary (``sweep``).
Nothing outside this package imports it."""
