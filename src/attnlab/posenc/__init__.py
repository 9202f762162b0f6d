"""Positional encodings, one file each on ``PositionalEncoding`` (``base``)."""
