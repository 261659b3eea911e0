"""One models.toml entry as a frozen dataclass (:class:`ModelSpec`) and sizes as written there
(``"4.37 GB"``): what every model module reads, kept apart from the reading and checking of
models.toml (registry.py), which asks the sources (sources.py) what an entry of each must say."""

from __future__ import annotations

import re
from dataclasses import dataclass

_UNITS = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
          "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}


@dataclass(frozen=True)
class ModelSpec:
    """One registry entry. Per-file fields (files, revisions, sha256, sizes) are
    tuples aligned with ``files``; ``sha256``/``sizes`` are empty when unknown."""

    name: str
    source: str
    files: tuple[str, ...]
    revisions: tuple[str, ...] = ()
    repo: str = ""
    sha256: tuple[str, ...] = ()
    sizes: tuple[int, ...] = ()
    size_approx: str = ""
    package: str = ""
    module: str = ""
    version: str = ""
    path: str = ""
    quant: str = ""
    params: str = ""
    license: str = ""
    gated: bool | None = None  # this file's repository
    base_gated: bool | None = None  # the model's original repository (the GGUF's may differ)
    tokenizer: str = ""
    chat_template: str = ""
    n_ctx: int | None = None
    reproduces: str = ""
    base: str = ""
    notes: str = ""
    same_as: str = ""
    origin: str = ""
    backend: str = ""  # the backend that opens it ("" = the one asked for); "fake": no file at all
    from_sha256: str = ""  # a rung `quantize` wrote: the SHA-256 of the file (its SOURCE) its ladder was made from

    @property
    def file(self) -> str:
        """The file given to llama.cpp (the first part of a split model); "" for a synthetic one."""
        return self.files[0] if self.files else ""

    @property
    def revision(self) -> str:
        """The revision of the first file ("" = the repository's main branch)."""
        return self.revisions[0] if self.revisions else ""

    @property
    def param_count(self) -> float | None:
        """``params`` as a number ("7B" -> 7e9); None when not given."""
        return parse_params(self.params)

    @property
    def approx_bytes(self) -> int | None:
        """Exact total size when known, else the parsed ``size_approx``, else None."""
        if self.sizes:
            return sum(self.sizes)
        return parse_size(self.size_approx) if self.size_approx else None

    def revision_for(self, index: int) -> str | None:
        """Revision to ask the hub for file ``index``; None means the default branch."""
        if not self.revisions:
            return None
        return self.revisions[index] or None

    def sha256_for(self, index: int) -> str | None:
        return self.sha256[index] if self.sha256 else None

    def size_for(self, index: int) -> int | None:
        return self.sizes[index] if self.sizes else None


def parse_params(text: str) -> float | None:
    """"7B" -> 7e9, "270M" -> 2.7e8, "0.5B" -> 5e8 (a registry entry's ``params`` or a model's name)."""
    m = re.search(r"(?<![\w.])(\d+(?:\.\d+)?)\s*([KMBT])(?![a-zA-Z])", text or "", re.I)
    return float(m.group(1)) * {"K": 1e3, "M": 1e6, "B": 1e9, "T": 1e12}[m.group(2).upper()] if m else None


def parse_size(text: str) -> int | None:
    """``"4.37 GB"`` -> 4370000000 (decimal units as shown on Hugging Face)."""
    m = re.fullmatch(r"\s*([0-9][0-9,]*(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*", text)
    if not m:
        return None
    unit = (m.group(2) or "B").upper()
    if unit not in _UNITS:
        return None
    return round(float(m.group(1).replace(",", "")) * _UNITS[unit])
