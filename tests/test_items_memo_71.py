"""A task's items are built once per process for the same data and settings (tasks/discotex.py: by the release
files' bytes; tasks/abricot.py: by the file's identity), the settings used last kept: what is remembered equals
what a fresh build makes, a file rewritten (same size, new bytes, new mtime) is read again, other settings give
other items, and what a call returns cannot be changed to corrupt a later call's."""

from __future__ import annotations

import dataclasses
import os
import shutil

import pytest

from abricot_local.tasks import abricot, discotex, discotex_release
from abricot_local.tasks.abricot import AbricotAbsTask, AbricotIncTask
from abricot_local.tasks.base import TaskOptions
from abricot_local.tasks.discotex import TRAIN, DiscotexTask
from conftest import FIXTURE
from invented_data import write_discotex


def forget() -> None:
    """Every memo of the items and of the rows they are made of (a fresh build follows)."""
    for module, name in ((discotex, "_BUILT"), (discotex_release, "_BUILT"), (discotex_release, "_READ"),
                         (abricot, "_LOADED"), (abricot, "_MADE")):
        getattr(module, name, {}).clear()


def view(items) -> list[tuple]:
    return [(it.id, it.source, it.context, it.choices, it.continuations, it.gold, it.fields, it.parse_special)
            for it in items]


def release_copy(folder):
    """Invented release files with a TED train file (the pool of rebuilt items' shots)."""
    write_discotex(folder, per_source=6)
    lines = ["ID\tPROMPT\tTARGET\tCLASS"] + [f"train_{i}\tParagrafo {i} di prova.\tSegue la frase {i}.\t{i % 2}"
                                             for i in range(12)]
    (folder / TRAIN[0]).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def disco(folder, **options):
    return DiscotexTask(TaskOptions(data_dir=str(folder), allow_download=False, **options))


def abri(cls=AbricotAbsTask, path=FIXTURE, **options):
    return cls(TaskOptions(data={"abricot": str(path)}, allow_download=False, **options))


DISCOTEX_SETTINGS = ({}, {"seed": 7}, {"shots": 2}, {"shots": 2, "shot_seed": 99}, {"prompt_variant": "ita-bench"},
                     {"shots": 2, "prompt_variant": "ita-bench"})
ABRICOT_SETTINGS = ((AbricotAbsTask, {}), (AbricotIncTask, {}), (AbricotAbsTask, {"shots": 0}),
                    (AbricotAbsTask, {"prompt_variant": "calamita"}), (AbricotAbsTask, {"shot_sampler": "shared"}),
                    (AbricotAbsTask, {"shot_seed": 5}))


def test_remembered_items_equal_a_fresh_build_and_other_settings_give_other_items(tmp_path):
    data, elsewhere = release_copy(tmp_path / "a"), tmp_path / "b"
    seen = []
    for options in DISCOTEX_SETTINGS:
        forget()
        first = disco(data, **options)
        want, notes = view(first.items()), first.warnings()
        assert notes and want not in seen, options  # (the invented files are not the release: said)
        seen.append(want)
        again = disco(data, **options)
        assert view(again.items()) == want and again.items()[0] is first.items()[0] and again.warnings() == notes
    shutil.copytree(data, elsewhere)  # the same bytes in another folder: the same items, not built again
    for options, want in zip(DISCOTEX_SETTINGS, seen):
        first = disco(data, **options)
        assert view(first.items()) == want
        other = disco(elsewhere, **options)
        assert view(other.items()) == want and other.items()[0] is first.items()[0], options
        assert other.warnings() == first.warnings() and other.data_path() == elsewhere
    made = []
    for cls, options in ABRICOT_SETTINGS:
        forget()
        want = view(abri(cls, **options).items())
        assert want not in made, (cls, options)
        made.append(want)
        again = abri(cls, **options)
        assert view(again.items()) == want and again.items()[0] is abri(cls, **options).items()[0]


def test_a_file_rewritten_with_the_same_size_is_read_again(tmp_path):
    data = release_copy(tmp_path / "d")
    ted = data / discotex_release.RELEASE["ted"][0]
    before = view(disco(data).items())
    st = ted.stat()
    ted.write_bytes(ted.read_bytes().replace(b"Poi ", b"Poj "))  # same size, other bytes
    os.utime(ted, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert ted.stat().st_size == st.st_size
    after = view(disco(data).items())
    assert after != before and any("Poj " in c for it in after for c in it[3])
    forget()
    assert view(disco(data).items()) == after

    path = shutil.copy(FIXTURE, tmp_path / "abricot.csv")
    gold = [it.gold for it in abri(path=path).items()]
    text = open(path, encoding="utf-8", newline="").read()
    st = os.stat(path)
    with open(path, "w", encoding="utf-8", newline="") as fh:  # inv-01's abstractness 0.12 -> 0.92: same size
        fh.write(text.replace(",0.1,0.04,0.12,0.05,", ",0.1,0.04,0.92,0.05,", 1))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert os.stat(path).st_size == st.st_size
    again = abri(path=path).items()
    assert [it.gold for it in again] == [4, *gold[1:]] != gold
    forget()
    assert view(abri(path=path).items()) == view(again)


def test_what_a_call_returns_cannot_be_changed_to_corrupt_a_later_call(tmp_path):
    data = release_copy(tmp_path / "d")
    for make in (lambda: disco(data, shots=2), lambda: abri()):
        task = make()
        got = task.items()
        want = view(got)
        first = got[0]
        got.append(got[0])
        got[0] = got[1]
        del got[1]
        with pytest.raises(dataclasses.FrozenInstanceError):
            first.context = "changed"
        assert view(task.items()) == want and view(make().items()) == want
    want = view(abri().items())
    abri()._load().clear()  # a task's rows: a list of its own
    assert view(abri().items()) == want != []


def test_the_settings_used_last_are_kept_not_all_dropped_when_the_memo_is_full(tmp_path):
    data = release_copy(tmp_path / "d")
    forget()
    kept = disco(data).items()
    for seed in range(1, discotex._BUILT_MAX):
        disco(data, seed=seed).items()
    assert disco(data).items()[0] is kept[0]  # used again: the last used now
    disco(data, seed=100).items()  # the memo full: the oldest use (seed 1) is dropped, not every entry
    assert disco(data).items()[0] is kept[0]
    assert len(discotex._BUILT) == discotex._BUILT_MAX


def test_the_memo_holds_as_many_items_as_eight_release_builds_not_more(tmp_path, monkeypatch):
    data = release_copy(tmp_path / "d")  # 12 items a build
    forget()
    monkeypatch.setattr(discotex, "_BUILT_ITEMS", 30, raising=False)
    a, b = disco(data, seed=1).items(), disco(data, seed=2).items()
    disco(data, seed=3).items()  # 36 items would be kept: the oldest use (seed 1) is dropped
    assert disco(data, seed=2).items()[0] is b[0] and disco(data, seed=1).items()[0] is not a[0]
    assert sum(len(v[0]) for v in discotex._BUILT.values()) <= 30
