"""The quant ladder's keep line picks, of the rungs shown as good as the reference, the smallest FILE when each records
its size (results.json ``model.size``), ties by the order of precision; else the last in that order, and says it is
the smallest quant by its name. The ladder's order itself is unchanged (gguf.file.by_precision: the names' when every
name is sized). SmolLM2-135M's case: Q4_K_M records 105 MB and 6.17 bits per weight, Q4_1 98 MB and 5.74 (its
tensors too narrow for 256-blocks fall back), yet the names put Q4_1 above Q4_K_M. Rungs made by hand, and three
fake-backend runs of 12 invented DISCOTEX items whose recorded sizes are edited in copies, in-process."""

from __future__ import annotations

import json
import shutil

import pytest

from abricot_local.analysis.equivalence import EQUIVALENT, NOT_WORSE, WORSE, Equivalence
from abricot_local.analysis.ladder import Rung, choices
from abricot_local.report import ladder as rows
from conftest import FAKE_DISCOTEX as FAKE, fake_quants, invoke_ok as invoke

MB = 1_000_000


def verdict(quant: str, kind: str) -> Equivalence:
    return Equivalence(quant, "F16", "discotex", "accuracy", 0.02, 30, 0.0, (-0.01, 0.01), kind, total=600)


def ladder(*others: tuple[str, str | None, int | None]) -> list[Rung]:
    """F16's ladder of ``others`` (quant, verdict kind or None: no common item, recorded size), in the order of
    precision given."""
    out = [Rung("smollm2", "discotex", "f16", "F16", "", 271 * MB, None, n=30)]
    return out + [Rung("smollm2", "discotex", q.lower(), q, "f16", size, None, n=30, verdict=kind and verdict(q, kind))
                  for q, kind, size in others]


def test_the_smallest_file_is_kept_when_the_names_order_says_otherwise():
    rungs = ladder(("Q4_1", EQUIVALENT, 98 * MB), ("Q4_K_M", EQUIVALENT, 105 * MB))
    (c,) = choices(rungs)
    assert [s.quant for s in c.rungs] == ["Q4_1", "Q4_K_M"]  # the ladder's order: the names', unchanged
    assert c.by_size and c.kept.quant == "Q4_1"
    line = rows.choice_text(c)
    assert line.startswith("Q4_1 is the smallest file (98 MB) shown as good as F16 (smollm2 on discotex, accuracy): "
                           "equivalent within 0.02 over 30 items; also shown as good: Q4_K_M (equivalent within 0.02 "
                           "over 30 items)"), line
    (j,) = [d["choice"] for d in rows.records(rungs) if "choice" in d]
    assert j["line"] == line and j["smallest_by"] == "file size"
    assert (j["smallest_as_good"]["quant"], j["smallest_as_good"]["size_bytes"]) == ("Q4_1", 98 * MB)
    assert [(s["quant"], s["size_bytes"]) for s in j["as_good"]] == [("Q4_1", 98 * MB), ("Q4_K_M", 105 * MB)]


def test_sizes_that_agree_with_the_names_keep_the_same_quant_said_as_the_smallest_file():
    rungs = ladder(("Q8_0", NOT_WORSE, 145 * MB), ("Q6_K", WORSE, 138 * MB), ("Q4_K_M", EQUIVALENT, 105 * MB))
    (c,) = choices(rungs)
    assert c.kept.quant == "Q4_K_M" == c.having(EQUIVALENT, NOT_WORSE)[-1].quant  # the last in order, as before
    assert rows.choice_text(c).startswith("Q4_K_M is the smallest file (105 MB) shown as good as F16 (smollm2 on "
                                          "discotex, accuracy): equivalent within 0.02 over 30 items; also shown as "
                                          "good: Q8_0 (not worse by more than 0.02 over 30 items); shown worse: Q6_K")


def test_only_the_rungs_shown_as_good_are_weighed_and_a_tie_goes_to_the_fewer_bits():
    worse_smaller = ladder(("Q8_0", EQUIVALENT, 145 * MB), ("Q4_K_M", EQUIVALENT, 105 * MB), ("Q2_K", WORSE, 88 * MB),
                           ("IQ1_S", None, None))
    (c,) = choices(worse_smaller)
    assert c.by_size and c.kept.quant == "Q4_K_M"  # a smaller file shown worse, or unsized with no verdict: not kept
    tie = ladder(("Q5_0", EQUIVALENT, 100 * MB), ("Q4_0", EQUIVALENT, 100 * MB), ("Q3_K_S", EQUIVALENT, 101 * MB))
    (c,) = choices(tie)
    assert c.kept.quant == "Q4_0"  # 100 MB twice: the later in the order of precision (the fewer bits)
    assert rows.choice_text(c).startswith("Q4_0 is the smallest file (100 MB) shown as good as F16")


def test_a_size_not_recorded_falls_back_to_the_fewest_bits_by_its_name_and_says_so():
    rungs = ladder(("Q4_1", EQUIVALENT, None), ("Q4_K_M", EQUIVALENT, 105 * MB))
    (c,) = choices(rungs)
    assert not c.by_size and c.kept.quant == "Q4_K_M"  # the last in the order of precision, as before
    line = rows.choice_text(c)
    assert line.startswith("Q4_K_M is the smallest quant by its name (fewest bits; Q4_1's file size not recorded) "
                           "shown as good as F16 (smollm2 on discotex, accuracy): equivalent within 0.02 over 30 items")
    (j,) = [d["choice"] for d in rows.records(rungs) if "choice" in d]
    assert j["smallest_by"] == "name" and j["smallest_as_good"]["quant"] == "Q4_K_M"
    none = ladder(("Q4_1", EQUIVALENT, None), ("Q4_K_M", EQUIVALENT, None))
    assert rows.choice_text(choices(none)[0]).startswith(
        "Q4_K_M is the smallest quant by its name (fewest bits; no file size recorded) shown as good as F16")
    nothing = ladder(("Q4_1", WORSE, 98 * MB))
    (c,) = choices(nothing)
    assert c.kept is None and not c.by_size and rows.choice_text(c).startswith("No quant is shown as good as F16 yet")
    (j,) = [d["choice"] for d in rows.records(nothing) if "choice" in d]
    assert j["smallest_as_good"] is None and j["smallest_by"] is None


NAMES = {"smollm2-f16": "F16", "smollm2-q4_1": "Q4_1", "smollm2-q4_k_m": "Q4_K_M"}


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """Three fake quants of one base over 12 invented items (the same answers: every rung equivalent, exact)."""
    from invented_data import write_discotex

    tmp = tmp_path_factory.mktemp("keep_smallest_file")
    data = write_discotex(tmp / "discotex", per_source=6)
    models = fake_quants(tmp / "models.toml", NAMES, base="smollm2")
    invoke("run", "smollm2-f16", "--quants", ",".join(NAMES.values()), "--models", models, *FAKE, "--data-dir", data,
           "--sample", 12, "--out", tmp / "sweep")
    return tmp / "sweep"


def recorded(sweep, out, sizes: dict[str, tuple[int, float]]):
    """A copy of the sweep, each run's results.json recording ``sizes[name]`` (bytes, bits per weight) for its file."""
    shutil.copytree(sweep, out)
    for name, (size, bits) in sizes.items():
        path = out / name / "results.json"
        doc = json.loads(path.read_text(encoding="utf-8"))
        doc["model"].update(size=size, bits_per_weight=bits)
        path.write_text(json.dumps(doc), encoding="utf-8")
    return [out / n for n in NAMES]


def lines(folders):
    from abricot_local.report import html, tables

    report = tables.build([str(f) for f in folders])
    (j,) = [x["choice"] for x in json.loads(tables.render(report, "json", table="quant"))["quant_ladder"]
            if x.get("choice")]
    assert j["line"] in tables.render(report, "markdown", table="quant")
    assert " ".join(j["line"].split()) in " ".join(tables.render(report, "table", table="quant").split())
    (page,) = [x["choice"] for x in html.report_data(report, figures=False)["ladder"] if x.get("choice")]
    assert page == j
    return j


def test_finished_runs_whose_recorded_sizes_contradict_the_names_keep_the_smaller_file(sweep, tmp_path):
    j = lines(recorded(sweep, tmp_path / "smollm2", {"smollm2-f16": (271 * MB, 16.0), "smollm2-q4_1": (98 * MB, 5.74),
                                                      "smollm2-q4_k_m": (105 * MB, 6.17)}))
    assert [s["quant"] for s in j["as_good"]] == ["Q4_1", "Q4_K_M"]  # the names' order, unchanged
    assert j["smallest_by"] == "file size" and j["smallest_as_good"]["quant"] == "Q4_1"
    assert j["line"].startswith("Q4_1 is the smallest file (98 MB) shown as good as F16 (smollm2 on discotex, "
                                "accuracy): ")


def test_finished_runs_whose_sizes_agree_with_the_names_keep_the_same_quant(sweep, tmp_path):
    j = lines(recorded(sweep, tmp_path / "agree", {"smollm2-f16": (271 * MB, 16.0), "smollm2-q4_1": (105 * MB, 5.74),
                                                    "smollm2-q4_k_m": (98 * MB, 5.2)}))
    assert j["smallest_by"] == "file size" and j["smallest_as_good"]["quant"] == "Q4_K_M"
    assert j["line"].startswith("Q4_K_M is the smallest file (98 MB) shown as good as F16")
    fake = lines([sweep / n for n in NAMES])  # the fake backend records no file: the names decide, said so
    assert fake["smallest_by"] == "name" and fake["smallest_as_good"]["quant"] == "Q4_K_M"
    assert fake["line"].startswith("Q4_K_M is the smallest quant by its name (fewest bits; no file size recorded) "
                                   "shown as good as F16")
