"""attnlab: an experiment framework for comparing attention variants in Transformer translation."""

from attnlab.resolvers import register as _register_resolvers

__version__ = "0.1.0"
_register_resolvers()  # ${div:...} in the configs
