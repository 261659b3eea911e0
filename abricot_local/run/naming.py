"""Where a request's runs write, named once per `run`: :class:`Folders`, which run.session.run makes for one
request (the request itself is a value: it names no folder it has to make). --out names a run's folder (a sweep's:
<out>/<the model's slug>, ``RunRequest.out_folder``); without it a default one is made, atomically, when it is
first asked for (:func:`fresh_folder`: two runs started in the same second never share one), and the default
folders left empty when the run ends go (a run refused or stopped before it wrote anything leaves none behind)."""

from __future__ import annotations

from pathlib import Path

from abricot_local.names import path_part
from abricot_local.run.request import slug


class Folders:
    """The folders of one run of ``request`` (a run.request.RunRequest): each named once, a default one made
    when first asked for; :meth:`drop_unused` removes the default ones still empty."""

    def __init__(self, request) -> None:
        self.request = request
        self._made: dict[str, tuple[Path, list[Path]]] = {}  # what fresh_folder made, by the name asked for

    @property
    def root(self) -> Path:
        """The folder of a sweep: --out, else results/sweep-<stamp> (made now, once)."""
        return self.request.out or self._default(Path("results"), f"sweep-{self.request.stamp}")

    def of(self, model: str, label: str | None = None) -> Path | None:
        """The folder ``model``'s run writes: in a sweep <root>/<its slug>, else --out, else results/<label>/<stamp>
        (``label``: the located model's; None before it is located: no folder yet), made now, once."""
        r = self.request
        if len(r.models) > 1:
            return self.root / slug(model)
        if r.out is not None or label is None:
            return r.out
        return self._default(Path("results") / path_part(label, "model"), r.stamp)

    def _default(self, parent: Path, name: str) -> Path:
        key = str(parent / name)
        if key not in self._made:
            self._made[key] = fresh_folder(parent, name)
        return self._made[key][0]

    def drop_unused(self) -> None:
        """Remove the default folders made here that are still empty, and the folders made for them, while
        empty."""
        for _folder, chain in list(self._made.values()):
            for path in chain:  # deepest first
                try:
                    path.rmdir()
                except OSError:  # not empty (written, or another run's), or gone
                    break


def fresh_folder(parent: Path, name: str) -> tuple[Path, list[Path]]:
    """A default run folder, and the folders made for it (deepest first): ``parent/name`` made now, or, when
    another run (started in the same second) or anything else has that name, the first of ``name-02``,
    ``name-03``, ... that this call makes (mkdir is atomic: two runs never get the same folder; the names sort in
    the order they were taken). When no folder can be made there (a file in the way, no permission),
    ``parent/name``, made by no one: the run's folder says why."""
    above = [p for p in (parent, *parent.parents) if not p.exists()]  # deepest first
    n = 1
    for _ in range(1000):
        path = parent / (name if n == 1 else f"{name}-{n:02d}")
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError:
            break
        try:
            path.mkdir()
            return path, [path, *above]
        except FileExistsError:
            n += 1
        except FileNotFoundError:  # its parent removed meanwhile (another run's, left empty): made again
            continue
        except OSError:
            break
    return parent / name, []
