"""Can the Hugging Face hub be reached? Asked once, quickly, before a download.

huggingface_hub retries a failed connection five times with back-off (six
``Retrying...`` lines over ~24 s) before it raises. A TCP connect to the hub's
endpoint (or to the proxy the environment names for it), with a short timeout,
tells the same thing in at most a few seconds; :mod:`abricot_local.models.fetch` then
stops with one line. The answer is kept for the process, per endpoint.
"""

from __future__ import annotations

import socket
import urllib.parse
import urllib.request

from abricot_local.errors import DownloadError

TIMEOUT = 3.0
_answers: dict[str, str | None] = {}


def endpoint() -> str:
    """The hub endpoint huggingface_hub uses (``HF_ENDPOINT``, default https://huggingface.co)."""
    from huggingface_hub import constants

    return constants.ENDPOINT


def _target(url: str) -> tuple[str, int]:
    """Host and port a connection to ``url`` goes to first: the proxy when one applies."""
    parts = urllib.parse.urlsplit(url)
    proxy = urllib.request.getproxies().get(parts.scheme)
    if proxy and not urllib.request.proxy_bypass(parts.hostname or ""):
        parts = urllib.parse.urlsplit(proxy if "://" in proxy else f"http://{proxy}")
    return parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)


def unreachable(timeout: float = TIMEOUT) -> str | None:
    """Why the hub cannot be reached (no TCP connection within ``timeout`` s), or None."""
    url = endpoint()
    if url not in _answers:
        host, port = _target(url)
        try:
            with socket.create_connection((host, port), timeout=timeout):
                reason = None
        except socket.timeout:
            reason = f"no answer from {host}:{port} within {timeout:g} s"
        except OSError as exc:
            reason = f"{host}:{port}: {exc.strerror or exc}"
        _answers[url] = reason
    return _answers[url]


MODEL_HINT = "give the path of a .gguf file, or a model already in the cache (`abricot-local models` shows which)"


def require(what: str, offline_hint: str = MODEL_HINT) -> None:
    """Raise one clear :class:`DownloadError` when the hub cannot be reached for ``what``."""
    reason = unreachable()
    if reason:
        raise DownloadError(
            f"cannot download {what}: the Hugging Face hub ({endpoint()}) cannot be reached ({reason}). "
            f"Check the network or proxy (HTTPS_PROXY, HF_ENDPOINT) and retry; offline, {offline_hint}."
        )
