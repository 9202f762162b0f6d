"""Parallel corpora (synthetic, hub, files), tokenizers, batching and the Lightning data module."""
