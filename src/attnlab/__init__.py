"""attnlab: an experiment framework for comparing attention variants in Transformer translation.

Packages, lowest first; a package imports only from those above it in this list (tested):

- ``config``: where the config tree lives, its resolvers;
- ``rundir``: the run directory's layout and files (no torch, no Lightning);
- ``data``: corpora, tokenizers, batching;
- ``posenc``, ``attention``, ``model``: the Transformer and its pluggable attention parts;
- ``analysis``: diagnostics and figures computed from models and attention maps;
- ``training``: the LightningModule, decoding, callbacks, loggers, distributed runs, one run end to end;
- ``compare``: many run directories into tables, significance, plots and a report;
- ``cli``: the console entry points ``attnlab-train``, ``attnlab-eval``, ``attnlab-compare``.
"""

from attnlab.config.resolvers import register as _register_resolvers

__version__ = "0.1.0"
_register_resolvers()  # ${div:...}, ${not:...}, ${options:...} in the configs
