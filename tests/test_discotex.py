"""DISCOTEX items built from the real release (the discotex_dir fixture), and malformed-file errors."""

import collections

import pytest

from abricot_local.errors import DataError
from abricot_local.tasks.base import TaskOptions
from abricot_local.tasks.discotex import DESCRIPTION, NONE_OF_THEM, DiscotexTask, read_release_tsv

HEADER = "ID\tPROMPT\tTARGET\tCLASS\n"


def task(data_dir, seed=1234):
    return DiscotexTask(TaskOptions(data_dir=str(data_dir), seed=seed))


@pytest.fixture(scope="module")
def items(discotex_dir):
    return DiscotexTask(TaskOptions(data_dir=str(discotex_dir))).items()


def test_release_gives_1600_items_ted_then_wiki(items):
    assert len(items) == 1600
    assert [it.source for it in items[:800]] == ["ted"] * 800
    assert [it.source for it in items[800:]] == ["wiki"] * 800
    assert items[0].id == "task_1_ted_test_1" and items[800].id == "task_1_wiki_test_1"


def test_gold_follows_class(items):
    for it in items:
        own = it.choices[it.fields["target_position"]]
        assert it.choices[4] == NONE_OF_THEM
        assert it.gold == (it.fields["target_position"] if it.fields["class"] == 1 else 4)
        assert len(set(it.choices[:4])) == 4, "distractors are distinct and differ from the own TARGET"
        assert own not in [c for k, c in enumerate(it.choices[:4]) if k != it.fields["target_position"]]
    golds = collections.Counter(it.gold for it in items)
    assert golds[4] == 800
    assert all(150 < golds[k] < 250 for k in range(4)), golds


def test_prompt_is_exactly_the_published_format(items):
    it = items[0]
    assert it.prefix == DESCRIPTION + "\n\n"
    body = it.context[len(it.prefix):]
    assert body.startswith("Paragrafo: '")
    assert "'\nDomanda: Quali delle seguenti frasi presenta una continuazione del precedente paragrafo?\nA. '" in body
    assert body.endswith(f"'\nE. {NONE_OF_THEM}\nRisposta:")
    for letter, choice in zip("ABCD", it.choices):
        assert f"\n{letter}. '{choice}'\n" in body
    assert it.continuations == (" A", " B", " C", " D", " E")


def test_construction_is_seeded_and_independent_of_other_rows(tmp_path, items, discotex_dir):
    again = task(discotex_dir).items()
    assert [(i.context, i.gold) for i in again] == [(i.context, i.gold) for i in items]
    other = task(discotex_dir, seed=99).items()
    assert sum(a.context != b.context for a, b in zip(items, other)) > 1500
    # A shorter file (first 50 rows) builds the same first 50 items' gold positions.
    small = tmp_path / "small"
    small.mkdir()
    for name in ("discotex_1_ted_test_set_release.tsv", "discotex_1_wiki_test_set_release.tsv"):
        rows = read_release_tsv(discotex_dir / name).rows[:50]
        with (small / name).open("w", encoding="utf-8", newline="") as fh:
            import csv

            w = csv.DictWriter(fh, fieldnames=["ID", "PROMPT", "TARGET", "CLASS"], delimiter="\t")
            w.writeheader()
            w.writerows(rows)
    sub = task(data_dir=small).items()
    assert [i.fields["target_position"] for i in sub[:50]] == [i.fields["target_position"] for i in items[:50]]


def write(tmp_path, text, name="discotex_1_ted_test_set_release.tsv"):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def test_missing_column(tmp_path):
    p = write(tmp_path, "ID\tPROMPT\tTARGET\nx\ty\tz\n")
    with pytest.raises(DataError, match="missing column.*CLASS"):
        read_release_tsv(p)


def test_bad_class(tmp_path):
    p = write(tmp_path, HEADER + "a\tp\tt\t2\n")
    with pytest.raises(DataError, match=r"line 2 \(ID a\): CLASS must be 0 or 1"):
        read_release_tsv(p)


def test_empty_field(tmp_path):
    p = write(tmp_path, HEADER + "a\t\tt\t1\n")
    with pytest.raises(DataError, match="column PROMPT is empty"):
        read_release_tsv(p)


def test_not_utf8(tmp_path):
    p = tmp_path / "x.tsv"
    p.write_bytes(HEADER.encode() + "a\tperch\xe9\tt\t1\n".encode("latin-1"))
    with pytest.raises(DataError, match="not UTF-8"):
        read_release_tsv(p)


def test_data_dir_without_the_files(tmp_path):
    with pytest.raises(DataError, match="lacks discotex_1_ted_test_set_release.tsv.*data_dir"):
        task(data_dir=tmp_path).items()


def test_no_data_offline_says_how_to_give_it():
    t = DiscotexTask(TaskOptions())
    with pytest.raises(Exception) as err:
        t.items()
    assert "--data-dir" in str(err.value) or "offline" in str(err.value).lower()


def test_pull_downloads_the_pinned_release_and_run_uses_the_cache(monkeypatch, discotex_dir):
    """No --data-dir: the task pulls the release (mocked network) into the cache, sha-verified."""
    import shutil

    from abricot_local.models import fetch
    from abricot_local.tasks import discotex

    calls = []

    def fake_download(url, dest, sha256, progress):  # fetch.download_files' one file
        calls.append((url, sha256))
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(discotex_dir / dest.name, dest)
        assert fetch.sha256_file(dest) == sha256
        return dest

    monkeypatch.setattr(fetch, "_download", fake_download)
    items = DiscotexTask(TaskOptions()).items()
    assert len(items) == 1600
    assert all(discotex.RELEASE_COMMIT in u and u.endswith(".tsv") for u, _ in calls) and len(calls) == 2
    assert (fetch.cache_dir() / "data" / "discotex" / "discotex_1_ted_test_set_release.tsv").is_file()


# -- inputs saved by another editor (issue 21, item 8) ---------------------------------------------
def test_a_crlf_copy_gives_the_release_items_bit_for_bit_and_says_so(tmp_path, items, discotex_dir):
    """Windows line endings (also inside the quoted multi-line PROMPTs) are read as the release's
    LF: the same contexts, choices and golds; the run's warnings say so, and the recorded data
    SHA-256 stays the copy's own."""
    import csv
    import json

    from click.testing import CliRunner

    from abricot_local.models import fetch
    from abricot_local.cli import cli

    crlf = tmp_path / "crlf"
    crlf.mkdir()
    for name in ("discotex_1_ted_test_set_release.tsv", "discotex_1_wiki_test_set_release.tsv"):
        raw = (discotex_dir / name).read_bytes()
        assert b"\r" not in raw  # the release has LF line endings
        (crlf / name).write_bytes(raw.replace(b"\n", b"\r\n"))
    name = "discotex_1_ted_test_set_release.tsv"
    with (crlf / name).open(encoding="utf-8", newline="") as fh:  # read as a plain csv reader would
        naive = list(csv.DictReader(fh, delimiter="\t"))
    assert sum("\r" in r["PROMPT"] for r in naive) > 100  # what drifted before: \r inside scored text

    t = task(crlf)
    got = t.items()
    assert [(i.id, i.context, i.choices, i.continuations, i.gold, i.fields) for i in got] == \
        [(i.id, i.context, i.choices, i.continuations, i.gold, i.fields) for i in items]
    assert not any("\r" in i.context for i in got)
    notes = t.warnings()
    assert len(notes) == 2 and all("CRLF line endings: read as LF" in n for n in notes) and name in notes[0]
    lf = task(discotex_dir)
    lf.items()
    assert lf.warnings() == []

    r = CliRunner().invoke(cli, ["run", "fake", "--backend", "fake", "--tasks", "discotex", "--data-dir", str(crlf),
                                 "--limit", "3", "--out", str(tmp_path / "o")])
    assert r.exit_code == 0, r.output
    doc = json.loads((tmp_path / "o" / "results.json").read_text())
    assert any("CRLF line endings" in w for w in doc["tasks"]["discotex"]["warnings"])
    recorded = {f["path"]: f["sha256"] for f in doc["tasks"]["discotex"]["data"]}
    assert recorded[str(crlf / name)] == fetch.sha256_file(crlf / name) != fetch.sha256_file(discotex_dir / name)
    assert "CRLF line endings" in r.stdout + r.stderr  # the summary shows it


def test_a_utf8_bom_is_accepted(tmp_path):
    body = HEADER + "".join(f"r{i}\tparagrafo {i}\tfrase {i}\t{i % 2}\n" for i in range(5))
    plain = write(tmp_path, body, "plain.tsv")
    bom = tmp_path / "bom.tsv"
    bom.write_bytes(b"\xef\xbb\xbf" + body.encode())
    assert read_release_tsv(bom) == read_release_tsv(plain)
    assert read_release_tsv(bom).rows[0]["ID"] == "r0"


def test_errors_cite_the_first_line_of_a_multiline_record(tmp_path):
    rows = "".join(f"r{i}\tp\tt\t1\n" for i in range(4))
    p = write(tmp_path, HEADER + rows + '\n"bad"\t"riga uno\nriga due\nriga tre"\tt\t2\n')  # a blank line, then line 7
    with pytest.raises(DataError, match=r"line 7 \(ID bad\): CLASS must be 0 or 1, got '2'"):
        read_release_tsv(p)
    p = write(tmp_path, HEADER + '"a"\t"uno\ndue"\t\t1\n' + rows)
    with pytest.raises(DataError, match="line 2: column TARGET is empty"):
        read_release_tsv(p)


# -- the release files: shape, NUL, a copy that is not the release ----------------------------------------
def tsv(folder, name: str, text: str):
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(text, encoding="utf-8")
    return folder / name


def test_a_tsv_with_id_and_prompt_swapped_is_refused(tmp_path):
    rows = "".join(f"\"Un paragrafo lungo {i}.\nSu due righe.\"\tid{i}\tfrase {i}\t1\n" for i in range(5))
    p = tsv(tmp_path, "x.tsv", HEADER + rows)  # the header says ID PROMPT, the values are PROMPT ID
    with pytest.raises(DataError, match=r"line 2: column ID holds .* not an id .*columns swapped"):
        read_release_tsv(p)


def test_a_nul_byte_is_refused_with_its_line(tmp_path):
    p = tsv(tmp_path, "x.tsv", HEADER + "".join(f"r{i}\tparagrafo {i}\tfrase {i}\t1\n" for i in range(3))
            + "r3\tpara\0grafo\tfrase\t0\n")
    with pytest.raises(DataError, match=r"x\.tsv, line 5: a NUL byte"):
        read_release_tsv(p)


def test_a_file_that_is_not_the_release_is_named_in_the_run(tmp_path, discotex_dir):
    other = tmp_path / "other"
    other.mkdir()
    for name in ("discotex_1_ted_test_set_release.tsv", "discotex_1_wiki_test_set_release.tsv"):
        (other / name).write_bytes((discotex_dir / name).read_bytes())
    ted = other / "discotex_1_ted_test_set_release.tsv"
    text = ted.read_text(encoding="utf-8")
    ted.write_text(text.replace("e", "E", 1), encoding="utf-8")  # one character changed
    out = tmp_path / "o"
    from click.testing import CliRunner

    from abricot_local.cli import cli

    r = CliRunner().invoke(cli, ["run", "fake", "--backend", "fake", "--tasks", "discotex", "--data-dir", str(other),
                                 "--limit", "2", "--out", str(out)])
    assert r.exit_code == 0, r.output
    import json

    warnings = json.loads((out / "results.json").read_text())["tasks"]["discotex"]["warnings"]
    assert any(w.startswith("discotex_1_ted_test_set_release.tsv differs from the DisCoTEX release") for w in warnings)
    assert not any("wiki_test" in w for w in warnings)


def test_items_are_built_once_per_files_and_options_and_again_for_a_file_rewritten(tmp_path):
    """A session's runs share the items of the same files and options (each task gets them with its own notes), and
    a data file rewritten, or another seed, gives items built anew: never the items of data that changed."""
    from invented_data import write_discotex

    data = write_discotex(tmp_path / "d", per_source=6)
    first = task(data)
    a = first.items()
    again = task(data)
    b = again.items()
    assert [it.context for it in b] == [it.context for it in a] and b[0] is a[0]  # the same items, not rebuilt
    assert again.warnings() == first.warnings() and any("differs from the DisCoTEX release" in w
                                                        for w in again.warnings()), again.warnings()
    assert [it.gold for it in task(data, seed=7).items()] != [it.gold for it in a] or \
        [it.choices for it in task(data, seed=7).items()] != [it.choices for it in a]  # another seed: built anew
    write_discotex(data, per_source=7)  # rewritten: one more row per source
    assert len(task(data).items()) == len(a) + 2
