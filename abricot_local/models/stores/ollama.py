"""Ollama's store, read from disk (a running Ollama server is never contacted).

``ollama:NAME[:TAG]`` (tag ``latest`` by default; NAME may be ``namespace/name`` or
``host/namespace/name``) is the manifest ``manifests/<host>/<namespace>/<name>/<tag>``
(schema v2) under ``$OLLAMA_MODELS``, else ``~/.ollama/models`` or the Linux service's
``/usr/share/ollama/.ollama/models``. Its layer of media type
``application/vnd.ollama.image.model`` is the GGUF, ``blobs/sha256-<hex>``: its name is its
SHA-256, which is verified, not trusted. A digest must be ``sha256:`` and 64 hex digits, so a
blob's path never leaves ``blobs/``; a manifest that is not what Ollama writes (a layer's
media type or digest of another type, JSON nested too deep) is one line, and a listing
shows it as unusable instead of failing. A manifest with an adapter or a projector layer is
refused (only the base GGUF would be scored). A template layer is compared with the GGUF's
own chat template, which is the one used.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from abricot_local.errors import IntegrityError, ModelError, UnknownModelError, opt
from . import Found, Listed, label_of

HOST, NAMESPACE, TAG = "registry.ollama.ai", "library", "latest"
MODEL = "application/vnd.ollama.image.model"
TEMPLATE = "application/vnd.ollama.image.template"
REFUSED = {"application/vnd.ollama.image.adapter": "a LoRA adapter",
           "application/vnd.ollama.image.projector": "a vision projector"}


def roots() -> list[Path]:
    """Where Ollama keeps models: ``$OLLAMA_MODELS`` only when set."""
    env = os.environ.get("OLLAMA_MODELS")
    if env:
        return [Path(env).expanduser()]
    return [Path.home() / ".ollama" / "models", Path("/usr/share/ollama/.ollama/models")]


def _stores() -> list[Path]:
    return [r for r in roots() if (r / "manifests").is_dir()]


def parse(rest: str) -> tuple[str, str, str, str]:
    """``NAME[:TAG]`` -> (host, namespace, name, tag)."""
    slash = rest.rfind("/")
    colon = rest.rfind(":")
    name, tag = (rest[:colon], rest[colon + 1:]) if colon > slash else (rest, TAG)
    parts = [p for p in name.split("/") if p]
    if not parts or len(parts) > 3 or not tag:
        raise ModelError(f"ollama:{rest}: expected ollama:NAME[:TAG] (like ollama:gemma3:270m)")
    host, ns = HOST, NAMESPACE
    if len(parts) == 3:
        host, ns, name = parts
    elif len(parts) == 2:
        ns, name = parts
    else:
        name = parts[0]
    return host, ns, name, tag


def display(host: str, ns: str, name: str, tag: str) -> str:
    """The name as Ollama shows it (host and namespace only when not the defaults)."""
    head = name if (host, ns) == (HOST, NAMESPACE) else f"{ns}/{name}" if host == HOST else f"{host}/{ns}/{name}"
    return f"ollama:{head}:{tag}"


DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


def check_digest(digest, where: str) -> str:
    """A layer's digest as Ollama writes it (``sha256:`` and 64 hex digits), else ModelError:
    nothing else may become a path."""
    if not isinstance(digest, str) or not DIGEST.fullmatch(digest):
        raise ModelError(f"{where}: a layer's digest is {repr(digest)[:80]}, not sha256: and 64 hex digits; "
                         "the manifest is damaged (run 'ollama pull' again)")
    return digest


def blob(root: Path, digest: str) -> Path:
    """A layer's file: ``blobs/sha256-<hex>`` (older stores: ``sha256:<hex>``); ``digest`` is
    checked first (:func:`check_digest`), so the path stays inside ``blobs/``."""
    algo, _, hexd = check_digest(digest, str(root)).partition(":")
    path = root / "blobs" / f"{algo}-{hexd}"
    old = root / "blobs" / f"{algo}:{hexd}"
    return old if not path.exists() and old.exists() else path


def _manifest(path: Path) -> dict:
    from abricot_local.jsonfiles import read_json

    doc = read_json(path, ModelError, "the Ollama manifest")
    if not isinstance(doc, dict) or doc.get("schemaVersion") != 2 or not isinstance(doc.get("layers"), list):
        raise ModelError(f"{path} is not an Ollama manifest of schema version 2")
    return doc


def _layers(doc: dict, where: str) -> list[dict]:
    """The manifest's layers, each an object with a media type (text) and a checked digest."""
    out = []
    for k, layer in enumerate(doc["layers"]):
        if not isinstance(layer, dict) or not isinstance(layer.get("mediaType"), str):
            raise ModelError(f"{where}: layer {k + 1} has no media type as text; the manifest is damaged "
                             "(run 'ollama pull' again)")
        check_digest(layer.get("digest"), where)
        out.append(layer)
    return out


def model_layer(doc: dict, where: str) -> dict:
    """The manifest's one model layer; adapters and projectors refused with the reason."""
    layers = _layers(doc, where)
    for layer in layers:
        if layer["mediaType"] in REFUSED:
            raise ModelError(f"{where} has {REFUSED[layer['mediaType']]} layer ({layer['mediaType']}): abricot-local "
                             "scores the base GGUF only, which would not be the model Ollama runs")
    models = [layer for layer in layers if layer["mediaType"] == MODEL]
    if len(models) != 1:
        raise ModelError(f"{where}: expected one layer of media type {MODEL}, found {len(models)}")
    return models[0]


def resolve(rest: str, *, offline=None, notify=None, progress: bool = True, fresh: bool = False) -> Found:
    host, ns, name, tag = parse(rest)
    shown = display(host, ns, name, tag)
    stores = _stores()
    if not stores:
        raise ModelError(f"{shown}: no Ollama store here (looked in {', '.join(map(str, roots()))}); "
                         "set OLLAMA_MODELS to the folder holding manifests/ and blobs/")
    for root in stores:
        path = root / "manifests" / host / ns / name / tag
        if path.is_file():
            return _found(root, path, shown, notify, fresh)
    from difflib import get_close_matches

    names = [x.name for x in listing()]
    close = get_close_matches(shown, names, n=3, cutoff=0.5)
    hint = f" Did you mean: {', '.join(close)}?" if close else (f" This store has: {', '.join(names[:8])}." if names else "")
    raise UnknownModelError(f"{shown} is not in the Ollama store ({', '.join(map(str, stores))}).{hint}")


def _found(root: Path, path: Path, shown: str, notify, fresh: bool) -> Found:
    from abricot_local.hashing import file_digest

    raw = path.read_bytes()
    doc = _manifest(path)
    layer = model_layer(doc, shown)
    file = blob(root, layer["digest"])
    if not file.is_file():
        raise ModelError(f"{shown}: the manifest's model layer {file} is missing; run 'ollama pull' again")
    want = layer["digest"].split(":", 1)[1]
    got = file_digest(file, fresh=fresh).sha256
    if got != want:
        raise IntegrityError(f"{shown}: the blob {file} has sha256 {got}, not the {want} its name and manifest say: "
                             "it is damaged; run 'ollama pull' again")
    facts = [("manifest", str(path)), ("manifest_sha256", hashlib.sha256(raw).hexdigest()),
             ("model_layer", layer["digest"])]
    note = template_note(root, doc, file)
    if note:
        facts.append(("template", note))
        if notify and note.startswith("differs"):
            notify(f"note: {shown}: Ollama's template differs from the GGUF's own chat template; {opt('chat_template', True)} "
                   "uses the GGUF's (recorded in results.json)")
    return Found(file, "ollama", label_of(shown.removeprefix("ollama:")), facts=tuple(facts))


def template_note(root: Path, doc: dict, gguf: Path) -> str:
    """Whether the manifest's template layer equals the GGUF's chat template ("" if it has none)."""
    layers = [layer for layer in _layers(doc, str(gguf)) if layer["mediaType"] == TEMPLATE]
    if not layers:
        return ""
    try:
        text = blob(root, layers[0]["digest"]).read_text(encoding="utf-8")
    except (OSError, ValueError):
        return "unreadable; the GGUF's is used"
    from abricot_local.gguf.file import headers

    own = headers(gguf)[0].metadata.get("tokenizer.chat_template")
    if own is not None and own.strip() == text.strip():
        return "same as the GGUF's"
    return f"differs from the GGUF's (Ollama's {layers[0]['digest'][:19]}); the GGUF's is used"


def listing() -> list[Listed]:
    """Every tag's model blob; a manifest that cannot be used is listed with its problem (the
    blob's content is checked against its name when the listing hashes it: ``sha256``)."""
    out = []
    for root in _stores():
        base = root / "manifests"
        for path in sorted(p for p in base.rglob("*") if p.is_file()):
            rel = path.relative_to(base).parts
            if len(rel) != 4:
                continue
            try:
                layer = model_layer(_manifest(path), str(path))
            except ModelError as err:
                out.append(Listed("ollama", display(*rel), path, problem=str(err)))
                continue
            file = blob(root, layer["digest"])
            if file.is_file():
                out.append(Listed("ollama", display(*rel), file, sha256=layer["digest"].split(":", 1)[1]))
    return out
