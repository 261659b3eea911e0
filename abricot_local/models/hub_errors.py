"""Hugging Face hub errors turned into one line a user can act on (:class:`DownloadError`)."""

from __future__ import annotations

from abricot_local.errors import DownloadError


def status(exc: BaseException) -> int | None:
    return getattr(getattr(exc, "response", None), "status_code", None)


def is_connection_error(exc: BaseException) -> bool:
    """A network failure (no answer), as opposed to an HTTP error answer."""
    if status(exc) is not None:
        return False
    names = {cls.__name__ for cls in type(exc).__mro__}
    network = {"ConnectionError", "ConnectError", "Timeout", "TimeoutException", "ConnectTimeout",
               "ReadTimeout", "ProxyError", "NetworkError", "TransportError", "RequestException"}
    return isinstance(exc, OSError) or bool(names & network)


def hub_error(exc: BaseException, repo: str, filename: str | None, revision: str | None, *,
               dataset: bool) -> BaseException:
    """Translate a huggingface_hub exception into a :class:`DownloadError` a user can act on."""
    from huggingface_hub import constants, errors

    host = constants.ENDPOINT.rstrip("/")  # HF_ENDPOINT's, else https://huggingface.co
    url = f"{host}/{'datasets/' if dataset else ''}{repo}"
    what = f"{repo}/{filename}" if filename else repo
    at = f" --revision {revision}" if revision else ""
    kind = " --repo-type dataset" if dataset else ""
    if isinstance(exc, (errors.LocalEntryNotFoundError, getattr(errors, "OfflineModeIsEnabled", ()))):
        return DownloadError(
            f"{what} is not in the local Hugging Face cache and cannot be downloaded now (offline: "
            f"ABRICOT_OFFLINE/HF_HUB_OFFLINE set, or {host} unreachable). When online, run "
            f"'hf download {repo} {filename or ''}{at}{kind}' or run again without offline mode"
            + (", or give the path to a .gguf file instead." if not dataset else ".")
        )
    if isinstance(exc, errors.GatedRepoError) or status(exc) in (401, 403):
        return DownloadError(
            f"access to {url} was refused (gated, private or missing repository). If it is gated, accept "
            f"its licence at {url} while logged in, create a token at https://huggingface.co/settings/tokens "
            "and set HF_TOKEN=<token>, then retry; otherwise check the repository name."
        )
    if isinstance(exc, errors.RepositoryNotFoundError):
        return DownloadError(f"repository {url} not found; check 'repo' in models.toml (if it is private, set HF_TOKEN)")
    if isinstance(exc, errors.RevisionNotFoundError):
        return DownloadError(f"revision {revision} not found in {url}; fix 'revision' in models.toml")
    if isinstance(exc, errors.EntryNotFoundError):
        return DownloadError(f"{filename} not found in {url}{' at ' + revision if revision else ''}; fix 'file' in models.toml")
    if isinstance(exc, errors.HfHubHTTPError):
        return DownloadError(f"Hugging Face refused the download of {what} (HTTP {status(exc)}): {exc}")
    if is_connection_error(exc):
        return DownloadError(f"could not download {what} from {host} ({type(exc).__name__}: {exc}); "
                             "check the network or proxy and retry (downloads resume)")
    return exc
