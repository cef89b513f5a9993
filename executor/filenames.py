"""File names of downloads and uploads, as both the executor and the server clean them."""

from __future__ import annotations

import unicodedata

MAX_FILENAME_CHARS = 255


def clean_filename(name: str, *, fallback: str = "") -> str:
    """A file name's base name without control characters, at most 255 characters ("" when nothing is left)."""
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    base = "".join(ch for ch in base if unicodedata.category(ch)[0] != "C").strip().strip(".")
    return base[:MAX_FILENAME_CHARS] or fallback
