"""attnlab: an experiment framework for comparing attention variants in Transformer translation."""

__version__ = "0.1.0"
