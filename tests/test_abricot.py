"""ABRICOT: byte-exact prompts, few-shot draw, discretisation, metrics, loader, pull, CLI.

The expected prompt texts below are typed in by hand from the published prompts (the ABRICOT
paper, CALAMITA 2024), not imported from the package, so a drift in either one fails here.
The data is the INVENTED fixture (tests/data/abricot_invented_fixture.csv): 18 rows made up for
tests that need no real data (test_abricot_protocol.py runs the real release).
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from scipy import stats

from abricot_local.core import Scored
from abricot_local.cli import cli
from abricot_local.errors import AbricotError, DataError
from abricot_local.record import Sample, read_samples
from abricot_local.metrics import bootstrap_ci
from abricot_local.tasks.abricot import AbricotAbsTask, AbricotIncTask, discretise
from abricot_local.tasks.abricot_data import load_rows


def find_data_file(options):
    return AbricotAbsTask(options).data_path()
from abricot_local.tasks.base import TaskOptions
from conftest import FIXTURE

# ---------------------------------------------------------------- expected prompts (from the paper, by hand)

PAPER_ABS = (
    "Assegna un valore di astrazione da 1 a 5 alla parola {parola} nel contesto della frase seguente:\n"
    "{frase}\n"
    "Descrizione dei valori:\n"
    "1 - La parola è estremamente concreta (e.g. un cane specifico)\n"
    "2 - La parola è lievemente concreta (e.g. un cane di una certa razza)\n"
    "3 - La parola è neutra (e.g. un cane tra tanti)\n"
    "4 - La prola è lievemente astratta (e.g. un cane è un animale da compagnia)\n"
    "5 - La parola è estremamente astratta (e.g. il cane è un mammifero)\n"
)
PAPER_INC = (
    "Assegna un valore di inclusività da 1 a 5 alla parola {parola} nel contesto della frase seguente:\n"
    "{frase}\n"
    "Descrizione dei valori:\n"
    "1 - La parola è estremamente specifica (e.g. un cane specifico)\n"
    "2 - La prola è lievemente specifica (e.g. un cane di una certa razza)\n"
    "3 - La parola è neutra (e.g. un cane tra tanti)\n"
    "4 - La parola è lievemente inclusiva (e.g. un cane è un animale da compagnia)\n"
    "5 - La parola è estremamente inclusiva (e.g. il cane è un mammifero)\n"
)
CALAMITA_ABS = (
    "Assegna un valore di astrazione da 1 a 5 alla parola {parola} nel contesto della frase seguente:\n"
    "{frase}\n"
    "Descrizione dei valori:\n"
    "1 - La parola è estremamente concreta (e.g. un cane specifico)\n"
    "2 - La parola è lievemente concreta (e.g. un cane di una certa razza)\n"
    "3 - La parola è neutra (e.g. un cane tra tanti)\n"
    "4 - La parola è lievemente astratta (e.g. un cane è un animale da compagnia)\n"
    "5 - La parola è estremamente astratta (e.g. il cane è un mammifero)\n"
    "\n"
    "Rispondi esclusivamente con il numero scelto senza aggiungere nessuna spiegazione\n"
)
CALAMITA_INC = (
    "Assegna un valore di inclusività da 1 a 5 alla parola {parola} nel contesto della frase seguente:\n"
    "{frase}\n"
    "Descrizione dei valori:\n"
    "1 - La parola è estremamente specifica (e.g. un cane specifico)\n"
    "2 - La parola è lievemente specifica (e.g. un cane di una certa razza)\n"
    "3 - La parola è neutra (e.g. un cane tra tanti)\n"
    "4 - La parola è lievemente inclusiva (e.g. un cane è un animale da compagnia)\n"
    "5 - La parola è estremamente inclusiva (e.g. il cane è un mammifero)\n"
    "\n"
    "Rispondi esclusivamente con il numero scelto senza aggiungere nessuna spiegazione\n"
)
TEMPLATES = {
    ("abs", "paper"): PAPER_ABS,
    ("inc", "paper"): PAPER_INC,
    ("abs", "calamita"): CALAMITA_ABS,
    ("inc", "calamita"): CALAMITA_INC,
}
TASKS = {"abs": AbricotAbsTask, "inc": AbricotIncTask}
MEAN_COL = {"abs": "abstractness mean", "inc": "inclusiveness mean"}
METRIC_KEYS = ("pearson", "pearson_continuous", "pearson_expected", "spearman", "accuracy")


def fixture_rows() -> dict[str, dict]:
    """The fixture read with the csv module (independent of the package loader)."""
    with open(FIXTURE, encoding="utf-8", newline="") as fh:
        return {r["ID"]: r for r in csv.DictReader(fh)}


def expected_prompt(kind: str, variant: str, row: dict) -> str:
    t = TEMPLATES[(kind, variant)]
    # plain replace, not str.format: the expected text must not depend on format rules
    return t.replace("{parola}", row["target token"]).replace("{frase}", row["text"])


def gold_digit(kind: str, row: dict) -> str:
    m = float(row[MEAN_COL[kind]])
    return str(min(round(5 * m), 4) + 1)


def opts(**kw) -> TaskOptions:
    kw.setdefault("data", (("abricot", str(FIXTURE)),))
    return TaskOptions(**kw)


# ---------------------------------------------------------------- 1. prompts byte for byte


def test_protocol_templates_sanity():
    """The hand-typed templates themselves: typos where the paper has them, and only there."""
    assert PAPER_ABS.count("prola") == 1 and "4 - La prola è lievemente astratta" in PAPER_ABS
    assert PAPER_INC.count("prola") == 1 and "2 - La prola è lievemente specifica" in PAPER_INC
    assert "prola" not in CALAMITA_ABS and "prola" not in CALAMITA_INC
    for t in TEMPLATES.values():
        assert t.endswith("\n") and not t.endswith("\n\n")
    assert CALAMITA_ABS.endswith(")\n\nRispondi esclusivamente con il numero scelto senza aggiungere nessuna spiegazione\n")


@pytest.mark.parametrize("variant", ["paper", "calamita"])
@pytest.mark.parametrize("kind", ["abs", "inc"])
def test_zero_shot_context_is_the_prompt_byte_for_byte(kind, variant):
    rows = fixture_rows()
    task = TASKS[kind](opts(shots=0, prompt_variant=variant))
    items = task.items()
    assert [it.id for it in items] == list(rows)
    for it in items:
        want = expected_prompt(kind, variant, rows[it.id])
        assert it.context.encode("utf-8") == want.encode("utf-8")
        # the cached prefix: none in the paper's wording; up to the blank line before "Rispondi..."
        assert it.prefix == ("" if variant == "paper" else want[: want.rindex("\nRispondi") + 1])
        assert it.continuations == (" 1", " 2", " 3", " 4", " 5")
        assert it.choices == ("1", "2", "3", "4", "5")
        assert it.gold + 1 == int(gold_digit(kind, rows[it.id]))
        assert it.fields["shot_ids"] == []
        assert it.fields["target"] == rows[it.id]["target token"]
        assert it.fields["human_mean"] == pytest.approx(float(rows[it.id][MEAN_COL[kind]]))
    assert task.config()["shots"] == 0 and task.config()["shot_ids"] == []
    assert task.config()["prompt_variant"] == variant


@pytest.mark.parametrize("variant", ["paper", "calamita"])
@pytest.mark.parametrize("kind", ["abs", "inc"])
def test_three_shot_shared_context_byte_for_byte(kind, variant):
    """Sampler ``shared`` (no published source's): one draw of 3 for every item."""
    rows = fixture_rows()
    task = TASKS[kind](opts(shots=3, prompt_variant=variant, shot_sampler="shared"))
    items = task.items()
    common = task.config()["shot_ids"]
    assert len(common) == 3 and len(set(common)) == 3 and set(common) <= set(rows)
    assert task.config()["shots"] == 3
    checked = 0
    for it in items:
        ids = it.fields["shot_ids"]
        assert len(ids) == 3 and it.id not in ids
        shots = [expected_prompt(kind, variant, rows[s]) + " " + gold_digit(kind, rows[s]) for s in ids]
        prompt = expected_prompt(kind, variant, rows[it.id])
        want_prefix = shots[0] + "\n\n" + shots[1] + "\n\n" + shots[2] + "\n\n"
        head = prompt[: prompt.rindex("\nRispondi") + 1] if variant == "calamita" else ""
        assert it.prefix.encode("utf-8") == (want_prefix + head).encode("utf-8")
        assert it.context.encode("utf-8") == (want_prefix + prompt).encode("utf-8")
        assert it.continuations == (" 1", " 2", " 3", " 4", " 5")
        if it.id not in common:
            assert ids == common
            checked += 1
    assert checked == len(rows) - 3


# ---------------------------------------------------------------- 2. shots never see their own item


def test_a_shot_item_never_sees_itself():
    task = AbricotAbsTask(opts(shots=3, shot_sampler="shared"))
    items = task.items()
    common = task.config()["shot_ids"]
    by_id = {it.id: it for it in items}
    prefixes = {it.prefix for it in items if it.id not in common}
    assert len(prefixes) == 1  # all other items share one prefix
    shared = prefixes.pop()
    for sid in common:
        it = by_id[sid]
        ids = it.fields["shot_ids"]
        assert sid not in ids and len(ids) == 3 and len(set(ids)) == 3
        assert len(set(ids) - set(common)) == 1 and len(set(common) - set(ids)) == 1
        assert set(common) - set(ids) == {sid}
        assert it.prefix != shared
        # its own sentence does not appear among its shots
        assert rows_text(sid) not in it.prefix


def rows_text(rid: str) -> str:
    return fixture_rows()[rid]["text"]


@pytest.mark.parametrize("sampler", ["shared", "lm-eval"])
def test_same_seed_same_shots_for_abs_and_inc_other_seed_differs(sampler):
    a = AbricotAbsTask(opts(shots=3, seed=7, shot_sampler=sampler))
    i = AbricotIncTask(opts(shots=3, seed=7, shot_sampler=sampler))
    ia, ii = a.items(), i.items()
    assert a.config()["shot_ids"] == i.config()["shot_ids"]
    assert [x.fields["shot_ids"] for x in ia] == [x.fields["shot_ids"] for x in ii]
    # same seed again: identical
    assert AbricotAbsTask(opts(shots=3, seed=7, shot_sampler=sampler)).items()[0].context == ia[0].context
    draws = set()
    for seed in (7, 8, 9, 10):
        t = AbricotAbsTask(opts(shots=3, seed=seed, shot_seed=seed, shot_sampler=sampler))
        draws.add(tuple(tuple(x.fields["shot_ids"]) for x in t.items()))
    assert len(draws) > 1


# ---------------------------------------------------------------- 3. discretisation


@pytest.mark.parametrize(
    "mean,index",
    [(0.0, 0), (0.1, 0), (0.3, 2), (0.5, 2), (0.7, 4), (0.9, 4), (1.0, 4), (0.19, 1), (0.61, 3)],
)
def test_discretise_edges(mean, index):
    assert discretise(mean) == index


def test_discretised_gold_in_items(tmp_path):
    means = [0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0]
    df = pd.DataFrame(
        {
            "id": [f"d{k}" for k in range(len(means))],
            "target_token": ["cane"] * len(means),
            "text": ["Il cane dorme."] * len(means),
            "abs_mean": means,
            "inc_mean": list(reversed(means)),
        }
    )
    path = tmp_path / "abricot_disc.csv"
    df.to_csv(path, index=False)
    items = AbricotAbsTask(TaskOptions(data=(("abricot", str(path)),), shots=0)).items()
    assert [it.gold for it in items] == [0, 0, 2, 2, 4, 4, 4]
    items = AbricotIncTask(TaskOptions(data=(("abricot", str(path)),), shots=0)).items()
    assert [it.gold for it in items] == [4, 4, 4, 2, 2, 0, 0]


# ---------------------------------------------------------------- 4. metrics against scipy


def make_samples(pred, gold, human, expected):
    return [Sample(id=f"i{k}", logprobs=(-1.0,) * 5, pred=p, gold=g, extra={"human_mean": h, "expected_score": e})
            for k, (p, g, h, e) in enumerate(zip(pred, gold, human, expected))]


def test_metrics_match_scipy():
    pred = [0, 1, 2, 4, 3, 2, 1, 0, 4, 3]
    gold = [0, 2, 2, 4, 4, 1, 1, 0, 3, 3]
    human = [0.05, 0.42, 0.47, 0.97, 0.81, 0.22, 0.28, 0.02, 0.66, 0.63]
    expected = [1.3, 2.6, 2.9, 4.7, 4.1, 2.2, 1.9, 1.1, 4.0, 3.6]
    m = AbricotAbsTask(TaskOptions(seed=1234)).metrics(make_samples(pred, gold, human, expected))
    p1, g1 = np.array(pred) + 1.0, np.array(gold) + 1.0
    assert m["pearson"] == pytest.approx(stats.pearsonr(p1, g1)[0], abs=1e-12)
    assert m["pearson_continuous"] == pytest.approx(stats.pearsonr(p1, human)[0], abs=1e-12)
    assert m["pearson_expected"] == pytest.approx(stats.pearsonr(expected, human)[0], abs=1e-12)
    assert m["spearman"] == pytest.approx(stats.spearmanr(p1, human)[0], abs=1e-12)
    assert m["accuracy"] == pytest.approx(np.mean(np.array(pred) == np.array(gold)))
    assert m["accuracy"] == pytest.approx(0.6)
    for key in METRIC_KEYS:
        ci = m[f"{key}_ci95"]
        assert isinstance(ci, list) and len(ci) == 2
        if key == "accuracy":
            assert all(math.isfinite(x) for x in ci) and ci[0] <= ci[1]
        else:  # 10 items: no side has 10 off its most common value, a correlation's interval is not read
            assert all(x != x for x in ci)
    # the CI a run would record is a bootstrap of the same statistic: the point is normally inside it
    lo, hi = bootstrap_ci("pearson", p1, g1, seed=1234)
    assert lo <= m["pearson"] <= hi


def test_metrics_constant_prediction_is_nan_not_an_error():
    n = 8
    pred = [2] * n
    gold = [0, 1, 2, 3, 4, 2, 1, 3]
    human = [0.1, 0.2, 0.45, 0.6, 0.95, 0.5, 0.3, 0.7]
    expected = [3.0] * n
    m = AbricotIncTask(TaskOptions()).metrics(make_samples(pred, gold, human, expected))
    for key in ("pearson", "pearson_continuous", "pearson_expected", "spearman"):
        assert math.isnan(m[key]), key
        assert len(m[f"{key}_ci95"]) == 2
    assert m["accuracy"] == pytest.approx(2 / 8)


def test_expected_score_is_softmax_weighted_mean():
    task = AbricotAbsTask(opts(shots=0))
    item = task.items()[0]
    lps = (-3.2, -1.1, -0.7, -2.5, -5.0)
    scored = Scored(logprobs=lps, continuation_tokens=((1,),) * 5, n_context_tokens=10, fast_path=True)
    rec = task.sample(item, scored)
    p = np.exp(np.array(lps)) / np.exp(np.array(lps)).sum()
    assert rec.fields["expected_score"] == pytest.approx(float(sum((k + 1) * p[k] for k in range(5))), abs=1e-12)
    assert rec.pred == 2 and rec.gold == item.gold
    assert rec.fields["human_mean"] == item.fields["human_mean"]
    # invariant to a shift of all logprobs (it is a softmax) and finite for very negative ones
    shifted = Scored(tuple(x - 900.0 for x in lps), ((1,),) * 5, 10, True)
    assert task.sample(item, shifted).fields["expected_score"] == pytest.approx(rec.fields["expected_score"], abs=1e-9)


# ---------------------------------------------------------------- 5. loader: spellings and formats

SHORT = {
    "ID": "id",
    "target token": "target_token",
    "target lemma": "target_lemma",
    "text": "text",
    "begin": "begin",
    "end": "end",
    "domain": "domain",
    "inclusiveness mean": "inc_mean",
    "inclusiveness std": "inc_std",
    "abstractness mean": "abs_mean",
    "abstractness std": "abs_std",
}
MIXED = {
    "ID": "Id",
    "target token": "Target_Token",
    "target lemma": "TARGET-LEMMA",
    "text": "Text",
    "begin": "BEGIN",
    "end": "End",
    "domain": "Domain",
    "inclusiveness mean": "Inclusiveness_Mean",
    "inclusiveness std": "inclusiveness_STD",
    "abstractness mean": "Abstractness_Mean",
    "abstractness std": "Abstractness  Std",
}


def fixture_frame() -> pd.DataFrame:
    df = pd.read_csv(FIXTURE, dtype=str, keep_default_na=False)
    for c in ("begin", "end"):
        df[c] = df[c].astype(int)
    for c in ("inclusiveness mean", "inclusiveness std", "abstractness mean", "abstractness std"):
        df[c] = df[c].astype(float)
    return df


def write_frame(df: pd.DataFrame, path: Path) -> Path:
    suffix = path.suffix
    if suffix == ".csv":
        df.to_csv(path, index=False)
    elif suffix == ".tsv":
        df.to_csv(path, sep="\t", index=False)
    elif suffix == ".jsonl":
        df.to_json(path, orient="records", lines=True, force_ascii=False)
    elif suffix == ".parquet":
        df.to_parquet(path, index=False)
    else:
        raise AssertionError(suffix)
    return path


def summary(rows):
    return [(r.id, r.target, r.text, r.domain) for r in rows]


def numbers(rows):
    return [(r.abs_mean, r.inc_mean, r.abs_std, r.inc_std) for r in rows]


def test_fixture_loads_as_written():
    rows, bad = load_rows(FIXTURE)
    ref = fixture_rows()
    assert bad == 0 and len(rows) == 18 == len(ref)
    for r in rows:
        want = ref[r.id]
        assert r.target == want["target token"] and r.text == want["text"] and r.domain == want["domain"]
        assert r.abs_mean == float(want["abstractness mean"]) and r.inc_mean == float(want["inclusiveness mean"])
        assert r.abs_std == float(want["abstractness std"]) and r.inc_std == float(want["inclusiveness std"])


@pytest.mark.parametrize("suffix", [".csv", ".tsv", ".jsonl", ".parquet"])
@pytest.mark.parametrize("names", ["short", "mixed"], ids=["short", "mixed"])
def test_loader_all_spellings_and_formats(tmp_path, suffix, names):
    ref, _ = load_rows(FIXTURE)
    df = fixture_frame().rename(columns=SHORT if names == "short" else MIXED)
    path = write_frame(df, tmp_path / f"abricot_{names}{suffix}")
    rows, bad = load_rows(path)
    assert bad == 0
    assert summary(rows) == summary(ref)
    # equal to the last bit except JSONL (see test_jsonl_means_are_read_exactly)
    for got, want in zip(numbers(rows), numbers(ref)):
        assert got == pytest.approx(want, rel=1e-15, abs=0)
    # and through the task: same items as from the fixture
    a = AbricotAbsTask(TaskOptions(data=(("abricot", str(path)),), shots=3)).items()
    b = AbricotAbsTask(opts(shots=3)).items()
    assert len({x.prefix for x in b}) == len(b)  # the default sampler (lm-eval's): each item its own shots
    assert [(x.id, x.context, x.gold) for x in a] == [(x.id, x.context, x.gold) for x in b]


def test_jsonl_means_are_read_exactly(tmp_path):
    ref, _ = load_rows(FIXTURE)
    path = write_frame(fixture_frame().rename(columns=SHORT), tmp_path / "abricot_exact.jsonl")
    with open(path, encoding="utf-8") as fh:
        want = [(r["abs_mean"], r["inc_mean"], r["abs_std"], r["inc_std"]) for r in map(json.loads, fh)]
    rows, _ = load_rows(path)
    assert numbers(ref) == want  # the file itself holds the exact values
    assert numbers(rows) == want


def test_data_dir_finds_one_file_and_refuses_two(tmp_path):
    d = tmp_path / "dd"
    d.mkdir()
    (d / "abricot_release.csv").write_bytes(FIXTURE.read_bytes())
    (d / "other.csv").write_text("x\n1\n")  # not abricot*: ignored
    (d / "abricot_notes.txt").write_text("ignored\n")  # not a data suffix: ignored
    o = TaskOptions(data_dir=str(d), shots=0)
    assert find_data_file(o) == d / "abricot_release.csv"
    assert len(AbricotAbsTask(o).items()) == 18
    write_frame(fixture_frame().rename(columns=SHORT), d / "abricot_short.jsonl")
    with pytest.raises(DataError) as e:
        find_data_file(o)
    assert "abricot_release.csv" in str(e.value) and "abricot_short.jsonl" in str(e.value)
    with pytest.raises(DataError):
        AbricotAbsTask(o).items()


# ---------------------------------------------------------------- 6. malformed files


def write_csv_rows(path: Path, mutate) -> Path:
    """The fixture as CSV with ``mutate(df)`` applied (all values as text)."""
    df = pd.read_csv(FIXTURE, dtype=str, keep_default_na=False)
    df = mutate(df)
    df.to_csv(path, index=False)
    return path


def set_cell(row, col, value):
    def f(df):
        df.loc[row, col] = value
        return df

    return f


def raises_data_error(path: Path) -> str:
    with pytest.raises(DataError) as e:
        load_rows(path)
    msg = str(e.value)
    assert path.name in msg, msg
    # the task surfaces the same error (and never another exception type)
    with pytest.raises(DataError):
        AbricotAbsTask(TaskOptions(data=(("abricot", str(path)),), shots=0)).items()
    return msg


def test_missing_required_column(tmp_path):
    p = write_csv_rows(tmp_path / "abricot_nocol.csv", lambda df: df.drop(columns=["abstractness mean"]))
    msg = raises_data_error(p)
    assert "abstractness_mean" in msg or "abs_mean" in msg


@pytest.mark.parametrize(
    "value,what",
    [("abc", "abc"), ("1.5", "1.5"), ("-0.2", "-0.2"), ("nan", "nan"), ("", "empty"), ("inf", "inf")],
    ids=["text", "above-1", "below-0", "nan", "empty", "inf"],
)
def test_bad_mean_names_row_and_column(tmp_path, value, what):
    p = write_csv_rows(tmp_path / "abricot_badmean.csv", set_cell(2, "abstractness mean", value))
    msg = raises_data_error(p)
    assert "row 3" in msg and "abstractness mean" in msg and what in msg, msg


def test_nan_mean_in_parquet_and_null_in_jsonl(tmp_path):
    df = fixture_frame()
    df.loc[4, "inclusiveness mean"] = float("nan")
    msg = raises_data_error(write_frame(df, tmp_path / "abricot_nan.parquet"))
    assert "row 5" in msg and "inclusiveness mean" in msg
    msg = raises_data_error(write_frame(df, tmp_path / "abricot_null.jsonl"))
    assert "row 5" in msg and "inclusiveness mean" in msg


@pytest.mark.parametrize("col", ["text", "target token"])
def test_empty_text_or_target(tmp_path, col):
    p = write_csv_rows(tmp_path / "abricot_empty_cell.csv", set_cell(6, col, "   "))
    msg = raises_data_error(p)
    assert "row 7" in msg and col in msg and "empty" in msg


def test_duplicate_id(tmp_path):
    p = write_csv_rows(tmp_path / "abricot_dup.csv", set_cell(9, "ID", "inv-02"))
    msg = raises_data_error(p)
    assert "row 10" in msg and "inv-02" in msg and "duplicate" in msg


@pytest.mark.parametrize("suffix", [".csv", ".tsv"])
def test_not_utf8(tmp_path, suffix):
    text = FIXTURE.read_text(encoding="utf-8")
    if suffix == ".tsv":
        text = fixture_frame().to_csv(sep="\t", index=False)
    p = tmp_path / f"abricot_latin1{suffix}"
    p.write_bytes(text.encode("latin-1"))  # "è", "à" as single bytes
    msg = raises_data_error(p)
    assert "UTF-8" in msg


def test_header_only_and_zero_byte_files(tmp_path):
    p = tmp_path / "abricot_header.csv"
    p.write_text(FIXTURE.read_text(encoding="utf-8").splitlines()[0] + "\n", encoding="utf-8")
    assert "no rows" in raises_data_error(p)
    z = tmp_path / "abricot_zero.csv"
    z.write_bytes(b"")
    raises_data_error(z)
    j = tmp_path / "abricot_zero.jsonl"
    j.write_bytes(b"")
    raises_data_error(j)


def test_unsupported_extension(tmp_path):
    p = tmp_path / "abricot_release.xlsx"
    p.write_bytes(b"PK\x03\x04 not really a workbook")
    msg = raises_data_error(p)
    assert ".xlsx" in msg and ".csv" in msg


def test_missing_given_file(tmp_path):
    with pytest.raises(DataError) as e:
        AbricotAbsTask(TaskOptions(data=(("abricot", str(tmp_path / "nope.csv")),))).items()
    assert "nope.csv" in str(e.value)


def test_bad_spans_warn_once_with_a_count(tmp_path):
    def shift(df):
        df.loc[0, "begin"] = "0"
        df.loc[5, "end"] = "30"
        return df

    p = write_csv_rows(tmp_path / "abricot_spans.csv", shift)
    task = AbricotAbsTask(TaskOptions(data=(("abricot", str(p)),), shots=0))
    assert len(task.items()) == 18
    assert len(task.warnings()) == 1
    assert "2 row(s)" in task.warnings()[0] and p.name in task.warnings()[0]
    # the good fixture gives none
    ok = AbricotAbsTask(opts(shots=0))
    ok.items()
    assert ok.warnings() == []


# ---------------------------------------------------------------- 7. mocked pull and the offline message


def test_no_data_offline_says_how_to_supply_the_file():
    with pytest.raises(AbricotError) as e:
        AbricotAbsTask(TaskOptions()).items()
    from abricot_local.cli.options import flags
    from abricot_local.errors import render

    assert 'offline: data={"abricot": FILE}' in str(e.value)  # Python's words
    assert "offline: --data abricot=FILE" in render(e.value.raw(), flags)  # the command line's


# ---------------------------------------------------------------- 8. end to end through the CLI


def _nan_eq(a, b):
    if isinstance(a, list):
        return len(a) == len(b) and all(_nan_eq(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and math.isnan(a):
        return b is None or (isinstance(b, float) and math.isnan(b))
    return b == pytest.approx(a, abs=1e-12)


@pytest.mark.parametrize(
    "extra,variant,shots",
    [(["--shots", "0"], "paper", 0), (["--prompt-variant", "calamita", "--shot-sampler", "shared"], "calamita", 3)],
    ids=["shots0-paper", "calamita-3shot-shared"],
)
def test_cli_end_to_end(tmp_path, extra, variant, shots):
    out = tmp_path / "out"
    args = ["run", "fake", "--backend", "fake", "--tasks", "abricot", "--data", f"abricot={FIXTURE}",
            "--n-ctx", "8192", "--out", str(out), *extra]
    r = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert r.exit_code == 0, r.output
    res = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert set(res["tasks"]) == {"abricot_abs", "abricot_inc"}
    ref = fixture_rows()
    shot_sets = []
    for name, kind in (("abricot_abs", "abs"), ("abricot_inc", "inc")):
        path = out / f"samples-{name}.jsonl"
        assert path.is_file()
        lines = path.read_text(encoding="utf-8").splitlines()
        assert len(lines) == 18
        samples = [json.loads(l) for l in lines]
        entry = res["tasks"][name]
        cfg = entry["config"]
        assert cfg["prompt_variant"] == variant and cfg["shots"] == shots
        assert len(cfg["shot_ids"]) == shots
        shot_sets.append(cfg["shot_ids"])
        for s in samples:
            assert "context" in s and s["gold"] in range(5) and s["pred"] in range(5)
            assert 0.0 <= s["human_mean"] <= 1.0 and 1.0 <= s["expected_score"] <= 5.0
            assert s["gold"] + 1 == int(gold_digit(kind, ref[s["id"]]))
            assert s["pred"] == int(np.argmax(s["logprobs"]))
            assert s["context"].endswith(expected_prompt(kind, variant, ref[s["id"]]))
            if shots == 0:
                assert s["context"] == expected_prompt(kind, variant, ref[s["id"]])
            elif s["id"] not in cfg["shot_ids"]:
                assert s["shot_ids"] == cfg["shot_ids"]
        assert entry["n"] == 18
        task = TASKS[kind](TaskOptions(seed=res["config"]["seed"]))
        again = task.metrics(read_samples(path))
        for key in METRIC_KEYS:
            assert _nan_eq(again[key], entry["metrics"][key]), key
            assert _nan_eq(again[f"{key}_ci95"], entry["metrics"][f"{key}_ci95"]), key
    assert shot_sets[0] == shot_sets[1]


# ---------------------------------------------------------------- JSON lines, line by line (issue 21, item 6)


def jsonl_with(tmp_path: Path, line3: str, name: str = "abricot_lines.jsonl") -> Path:
    """The fixture as JSON lines with its third line replaced by ``line3``."""
    path = write_frame(fixture_frame().rename(columns=SHORT), tmp_path / name)
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[2] = line3
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("line,what", [
    ("[1,2,3]", "got an array ([1, 2, 3])"), ("5", "got a number (5)"), ("null", "got null"),
    ('"testo"', 'got a string ("testo")'), ("true", "got a boolean (true)"),
    ('{"id": "x", "text": "a"', "not valid JSON"),
], ids=["array", "number", "null", "string", "boolean", "torn"])
def test_every_jsonl_line_must_be_an_object(tmp_path, line, what):
    msg = raises_data_error(jsonl_with(tmp_path, line))
    assert "line 3" in msg and what in msg, msg


def test_jsonl_values_of_the_wrong_kind_name_row_and_key(tmp_path):
    rec = json.loads(jsonl_with(tmp_path, "{}").read_text(encoding="utf-8").splitlines()[0])
    for key, value, what in (("abs_mean", True, "True is not a number"), ("text", ["a", "b"], "an array"),
                             ("inc_mean", {"v": 0.5}, "is not a number")):
        msg = raises_data_error(jsonl_with(tmp_path, json.dumps({**rec, "id": "zz", key: value})))
        assert "row 3" in msg and key in msg and what in msg, msg


@pytest.mark.parametrize("suffix", [".csv", ".tsv", ".jsonl"])
def test_a_bom_and_blank_json_lines_read_as_written(tmp_path, suffix):
    ref, _ = load_rows(FIXTURE)
    path = write_frame(fixture_frame().rename(columns=SHORT), tmp_path / f"abricot_bom{suffix}")
    raw = path.read_bytes()
    path.write_bytes(b"\xef\xbb\xbf" + (raw.replace(b"\n", b"\n\n", 3) if suffix == ".jsonl" else raw))
    rows, _ = load_rows(path)
    assert summary(rows) == summary(ref) and numbers(rows) == numbers(ref)


def test_reading_data_files_leaks_no_open_file(tmp_path, monkeypatch):
    """ResourceWarning (an unclosed file) is raised in a finalizer: it reaches the unraisable hook."""
    import gc
    import sys
    import warnings

    leaks = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: leaks.append(u))
    files = [write_frame(fixture_frame().rename(columns=SHORT), tmp_path / f"abricot_ok{s}") for s in (".jsonl", ".csv", ".tsv")]
    files += [jsonl_with(tmp_path, bad, f"abricot_bad{k}.jsonl") for k, bad in enumerate(("[1,2,3]", "{", "null"))]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for path in files:
            try:
                load_rows(path)
            except DataError:
                pass
        gc.collect()
    assert not [w for w in caught if issubclass(w.category, ResourceWarning)] and not leaks
