"""The full-vocabulary KL divergence (`kld`): rows compared in lockstep and dropped, statistics as
llama-perplexity reports them, kept in the run folder and shown by the ladder, compare and the API;
`quantize`'s pure parts (the rungs asked, llama.cpp's fallbacks in one line, the models.toml fragment)."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from click.testing import CliRunner

from abricot_local.analysis.kld import KldStats, summarise
from abricot_local.backends.engines import engine_class
from abricot_local.backends.fake import FakeSession
from abricot_local.backends.kld import KlRows, PairedSession, kl_row
from abricot_local.backends.options import ScoringOptions
from abricot_local.backends.base import Schedule
from abricot_local.cli import cli
from abricot_local.errors import NonFiniteError, UsageError
from invented_data import write_discotex


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def test_kl_row_is_the_full_vocabulary_kl_in_float64():
    rng = np.random.default_rng(0)
    p, q = rng.normal(size=1000).astype(np.float32), rng.normal(size=1000).astype(np.float32)
    kl, same = kl_row(p, q)
    lp = p.astype(np.float64) - np.log(np.exp(p.astype(np.float64)).sum())
    lq = q.astype(np.float64) - np.log(np.exp(q.astype(np.float64)).sum())
    assert kl == pytest.approx(float((np.exp(lp) * (lp - lq)).sum()), rel=1e-9) and kl > 0
    assert same == (int(np.argmax(p)) == int(np.argmax(q)))
    assert kl_row(p, p.copy()) == (0.0, True)  # the same row: exactly 0
    bad = q.copy()
    bad[3] = np.nan
    with pytest.raises(NonFiniteError, match="non-finite logits"):
        kl_row(p, bad)


def test_summary_is_llama_perplexity_s():
    rng = np.random.default_rng(1)
    x = rng.exponential(0.05, size=2001)
    ends = [300 * k for k in range(1, 7)] + [2001]  # 7 items
    s = summarise(x, x < 0.1, n_items=7, ends=ends)
    se = x.std(ddof=1) / np.sqrt(x.size)  # llama-perplexity's "±": every token independent, kept beside the CI
    assert s.mean == pytest.approx(x.mean(), rel=1e-12) and s.se_token == pytest.approx(se, rel=1e-9)
    assert s.n_units == 7 and s.ci95[0] < s.mean < s.ci95[1]  # the CI is over the items (tests/test_kld_items.py)
    srt = np.sort(x)  # llama-perplexity: linear interpolation at fraction * (n - 1)
    assert s.median == srt[1000] and s.p99 == pytest.approx(srt[1980]) and s.max == srt[-1]
    assert s.p99_9 == pytest.approx(srt[1998]) and s.same_top == np.mean(x < 0.1)
    assert KldStats.from_dict(json.loads(json.dumps(s.to_dict()))) == s and s.n_items == 7
    with pytest.raises(Exception, match="no token"):
        summarise([], [])


def _score(ref_seed: int, rung_seed: int) -> tuple[KlRows, int]:
    opts = ScoringOptions(engine="prefix")
    rows = KlRows()
    engine = engine_class("prefix")(PairedSession(FakeSession(ScoringOptions(seed=ref_seed)),
                                                  FakeSession(ScoringOptions(seed=rung_seed)), rows), opts)
    sch = [Schedule.from_tokens([1, 5, 9, 2, 7], [[3, 4], [8]], 64), Schedule.from_tokens([1, 5, 9, 6], [[3]], 64)]
    engine.score_many(sch, ["a", "b"])
    assert len(rows) == engine.counters.tokens > 0  # a row at every decoded token, not only the scored ones
    return rows, engine.counters.decode_calls


def test_the_two_models_decode_the_same_calls_and_every_row_is_compared():
    same, calls = _score(3, 3)
    assert len(same) > 0 and set(same.kl) == {0.0} and all(same.same_top)
    other, calls2 = _score(3, 4)
    assert len(other) == len(same) and calls2 == calls and min(other.kl) > 0  # another model: every row differs


def test_kld_of_two_runs_is_kept_in_the_run_folder_and_shown(tmp_path):
    data = write_discotex(tmp_path / "d", 4)
    models = tmp_path / "models.toml"
    models.write_text("".join(f'[tiny-{k}]\nsource = "synthetic"\nbackend = "fake"\nquant = "{q}"\nbase = "Tiny"\n\n'
                              for k, q in (("q8", "Q8_0"), ("q4", "Q4_K_M"))), encoding="utf-8")
    out = tmp_path / "ladder"
    r = invoke("run", "tiny-q8", "--models", models, "--quants", "Q4_K_M,Q8_0", "--tasks", "discotex",
               "--data-dir", data, "--sample", 4, "--out", out)  # 4 items: a full row at each of their tokens
    assert r.exit_code == 0, r.output
    r = invoke("kld", out / "tiny-q8", out / "tiny-q4", "--json")
    assert r.exit_code == 0, r.output
    res = json.loads(r.stdout)[0]["tasks"]["discotex"]
    assert res["n_items"] == 4 and res["n_tokens"] >= 4 and res["mean"] == 0.0 and res["same_top"] == 1.0
    doc = json.loads((out / "tiny-q4" / "kld.json").read_text())
    ref_sha = json.loads((out / "tiny-q8" / "results.json").read_text())["model"]["sha256"]
    assert list(doc["references"]) == [ref_sha or "name:tiny-q8"]
    ladder = json.loads(invoke("report", out, "--models", models, "--table", "quant", "--format", "json").stdout)
    q4 = next(x for x in ladder["quant_ladder"] if x["quant"] == "Q4_K_M")
    assert q4["kld"]["mean"] == 0.0 and q4["kld"]["same_top"] == 1.0 and q4["kl_mean"] == 0.0  # both, apart
    assert "KLD mean" in invoke("report", out, "--models", models, "--table", "quant").stdout
    cmp = json.loads(invoke("compare", out / "tiny-q8", out / "tiny-q4", "--models", models, "--format", "json").stdout)
    assert [(k["run"], k["task"], k["kld"]["n_items"]) for k in cmp["kld"]] == [("tiny-q4", "discotex", 4)]
    import abricot_local as al

    frame = al.compare([out / "tiny-q8", out / "tiny-q4"], models_file=models).kld()
    assert list(frame["run"]) == ["tiny-q4"] and frame["mean"].iloc[0] == 0.0
    assert (frame["n_items"].iloc[0], frame["n_tokens"].iloc[0]) == (4, cmp["kld"][0]["kld"]["n_tokens"])
    bad = invoke("kld", out / "tiny-q8", out / "tiny-q8")
    assert bad.exit_code != 0 and "is the reference itself" in bad.output


def test_quantize_parses_rungs_and_summarises_fallbacks():
    from abricot_local.models.quantize import parse_rungs

    assert parse_rungs("q8_0, Q4_K_M,Q8_0") == ("Q8_0", "Q4_K_M")
    with pytest.raises(UsageError, match="unknown quant Q9"):
        parse_rungs("Q9")
    pytest.importorskip("llama_cpp")
    from abricot_local.backends.llama_cpp.quantize import fallback_summary

    one = ("warning: blk.0.attn_q.weight                  - ncols    640 not divisible by 256 (required for type "
           "   q6_K) -> falling back to    q8_0\n")
    other = "[  13/ 236]            blk.0.ffn_up.weight - [ 1024,  2048,     1,     1], type =    f16, converting to q6_K\n"
    text = one * 3 + other + "llama_model_quantize_impl: WARNING: 3 of 236 tensor(s) required fallback quantization\n"
    assert fallback_summary(text) == "3 of 236 tensors fell back (q6_K -> q8_0: 3; columns not divisible by 256)"
    assert fallback_summary(other) == ""


def test_quantize_refuses_a_quantized_source_without_allow_requantize(tmp_path):
    from abricot_local.models.quantize import make_ladder
    from gguf_synth import Synth, kv

    src = Synth(kvs=[*Synth().kvs, kv("general.file_type", "u32", 15)]).write(tmp_path / "m.gguf")
    with pytest.raises(UsageError, match=r"already quantized \(Q4_K_M\).*allow_requantize=True"):
        make_ladder(str(src), "Q8_0", out=str(tmp_path / "rungs"))
    assert not (tmp_path / "rungs").exists()


# -- kld's own issues (48 items 4-5, 47 item 3) ----------------------------------------------------
LADDER = ("F16", "Q8_0", "Q4_0")


@pytest.fixture(scope="module")
def ladder(tmp_path_factory):
    """A fake ladder of three rungs (the first 4 of 8 items: kld asks a row at every token), and the Q4_0
    run again on its first 3 items (``short-q4_0``: other items, so another reference pass), made once:
    (its folder, its models.toml)."""
    root = tmp_path_factory.mktemp("kld_ladder")
    data = write_discotex(root / "d", 4)
    models = root / "models.toml"
    models.write_text("".join(f'[t-{q.lower()}]\nsource = "synthetic"\nbackend = "fake"\nquant = "{q}"\nbase = "t"\n\n'
                              for q in LADDER), encoding="utf-8")
    out = root / "ladder"
    r = invoke("run", "t-f16", "--models", models, "--quants", ",".join(LADDER), "--tasks", "discotex",
               "--data-dir", data, "--limit", 4, "--out", out)
    assert r.exit_code == 0, r.output
    r = invoke("run", "t-q4_0", "--models", models, "--tasks", "discotex", "--data-dir", data, "--limit", 3,
               "--out", root / "short-q4_0")
    assert r.exit_code == 0, r.output
    signalled = _signalled((out, models), tmp_path_factory)  # started now: they run beside the module's tests
    yield out, models
    for child, _ in signalled.values():
        child.close()


# `kld` in a fresh process on a copy of the ladder, sent a signal once its second reference pass begins, by a driver
# started with the ladder (beside the module's other tests): it prints kld's exit code and stderr
KLD_SIGNAL = """
import json, signal, subprocess, sys
sig = getattr(signal, sys.argv[1])
proc = subprocess.Popen(sys.argv[2:], stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
seen = []
for line in proc.stderr:  # the first reference pass is measured, the second begins
    seen.append(line)
    if "pass 2 of 2" in line:
        break
proc.send_signal(sig)
rest = proc.stderr.read()
proc.wait(60)
print(json.dumps({"returncode": proc.returncode, "err": "".join(seen) + rest}))
"""
SIGNALLED: dict = {}  # signal name -> (its driver, conftest.Early; the ladder's copy it works on)


def _signalled(ladder, tmp_path_factory) -> dict:
    import os
    import sys
    from pathlib import Path

    from conftest import Early, isolated_env

    for signum in ("SIGINT", "SIGTERM"):
        root = tmp_path_factory.mktemp(f"kld-{signum}")
        out = _copy(ladder, root)
        env = {**os.environ, **isolated_env(root), "ABRICOT_PROGRESS_SECONDS": "0",
               "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
        kld = [sys.executable, "-m", "abricot_local", "kld", str(out / "t-f16"), str(out / "t-q8_0"),
               str(out / "short-q4_0")]
        SIGNALLED[signum] = (Early([sys.executable, "-c", KLD_SIGNAL, signum, *kld], env=env, cwd=root,
                                   timeout=120).start(), out)
    return SIGNALLED


def _copy(ladder, tmp_path):
    """The ladder's folder copied (kld writes into its runs), with short-q4_0 in it."""
    import shutil

    out = tmp_path / "ladder"
    shutil.copytree(ladder[0], out)
    shutil.copytree(ladder[0].parent / "short-q4_0", out / "short-q4_0")
    return out


def _tasks(folder) -> dict:
    (entry,) = json.loads((folder / "kld.json").read_text())["references"].values()
    return entry["tasks"]


def _distinct(monkeypatch) -> None:
    """Each fake model its own rows (a fake model's rows depend on the seed alone: every rung would be the
    reference): the seed moved by the model's name."""
    from dataclasses import replace

    from abricot_local.backends.fake import FakeBackend

    init = FakeBackend.__init__
    monkeypatch.setattr(FakeBackend, "__init__", lambda self, model="fake", options=ScoringOptions(): init(
        self, model, replace(options, seed=options.seed + sum(model.encode()))))


def test_a_ladder_gives_each_run_the_kld_json_it_gets_alone(ladder, tmp_path, monkeypatch):
    """`kld REF R1 R2 R3` against `kld REF R1`, `kld REF R2`, `kld REF R3`: every rung's statistics the same
    bits, in one reference pass, in passes cut by memory, and a run that scored other items in its own."""
    from abricot_local import memory
    from abricot_local.backends.base import Preflight
    from abricot_local.backends.fake import FakeBackend
    from abricot_local.run.kld import kld_runs

    _distinct(monkeypatch)
    out = _copy(ladder, tmp_path)
    names = ("t-q8_0", "t-q4_0", "short-q4_0")
    alone = {}
    for name in names:
        (res,) = kld_runs(out / "t-f16", [out / name])
        alone[name] = (_tasks(out / name), res.decode_calls)
        (out / name / "kld.json").unlink()
    assert alone["t-q8_0"][0] != alone["t-q4_0"][0] and alone["t-q4_0"][0] != alone["short-q4_0"][0]
    assert min(a["discotex"]["mean"] for a, _ in alone.values()) > 0

    said = []
    got = kld_runs(out / "t-f16", [out / n for n in names], notify=said.append)
    assert [r.pass_rungs for r in got] == [(out / "t-q8_0", out / "t-q4_0")] * 2 + [(out / "short-q4_0",)]
    assert "2 reference passes" in said[0] and len([s for s in said if "kld: pass" in s]) == 2
    for r in got:  # one pass decodes what each rung alone decodes: the reference once for both
        assert _tasks(r.run) == alone[r.run.name][0] and r.decode_calls == alone[r.run.name][1]

    # memory for the reference and one rung only (each model: its KV cache + n_batch rows of 257 floats): the two
    # rungs that shared a pass get one each (short-q4_0, on other items, has its own pass either way)
    row = ScoringOptions().n_batch * 257 * 4
    monkeypatch.setattr(FakeBackend, "preflight", classmethod(lambda cls, path, options: Preflight(kv_bytes=1000)))
    monkeypatch.setattr(memory, "available_memory", lambda: 2 * (row + 1000))
    got = kld_runs(out / "t-f16", [out / n for n in names[:2]])
    assert [r.pass_rungs for r in got] == [(out / n,) for n in names[:2]]
    assert all(_tasks(r.run) == alone[r.run.name][0] for r in got)
    monkeypatch.setattr(memory, "available_memory", lambda: row)
    with pytest.raises(Exception, match="not enough memory for kld"):
        kld_runs(out / "t-f16", [out / "t-q8_0"])


def test_two_kld_runs_at_once_into_one_rung_keep_both_entries(ladder, tmp_path, monkeypatch):
    """Each kld reads kld.json, adds its entry and writes it back: two at once, both read before either
    wrote, and one entry was lost (2 of 3 trials). Here they are made to meet there every time."""
    import threading

    from abricot_local.analysis import kld as stats
    from abricot_local.run.kld import kld_runs

    out = _copy(ladder, tmp_path)
    import fcntl

    meet = threading.Barrier(2, timeout=1.5)  # a second reader waiting on a lock never comes: 1.5 s at most
    read = stats.entries
    flock = fcntl.flock

    def waiting(fd, op):  # ... and it does not wait that long: the other, refused the lock, lets it on at once
        try:
            return flock(fd, op)
        except OSError:
            meet.abort()
            raise

    def entries(folder):
        got = read(folder)
        try:
            meet.wait()
        except threading.BrokenBarrierError:
            pass
        return got

    monkeypatch.setattr(stats, "entries", entries)
    monkeypatch.setattr(fcntl, "flock", waiting)
    errors = []

    def measure(reference):
        try:
            kld_runs(out / reference, [out / "t-q4_0"], limit=1)
        except BaseException as err:  # noqa: BLE001  (said by the assertion below)
            errors.append(err)

    threads = [threading.Thread(target=measure, args=(r,)) for r in ("t-f16", "t-q8_0")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    doc = json.loads((out / "t-q4_0" / "kld.json").read_text())
    refs = {e["reference"]["model"] for e in doc["references"].values()}
    assert refs == {"t-f16", "t-q8_0"}
    assert not [p.name for p in (out / "t-q4_0").iterdir() if "lock" in p.name]  # the lock is not left behind


@pytest.fixture(scope="module")
def measured(ladder, tmp_path_factory):
    """`kld` of the three rungs against t-f16 (two reference passes), made once on a copy of the ladder: its results
    and the progress calls it made. Read only."""
    from abricot_local.run.kld import kld_runs
    from conftest import isolated_env

    root = tmp_path_factory.mktemp("kld_measured")
    out = _copy(ladder, root)
    calls = []
    with pytest.MonkeyPatch.context() as mp:  # as isolated_home, for a result shared past its test
        for name, value in isolated_env(root).items():
            mp.setenv(name, value)
        got = kld_runs(out / "t-f16", [out / "t-q8_0", out / "t-q4_0", out / "short-q4_0"],
                       progress=lambda *a: calls.append(a))
    return got, calls


def test_each_rung_has_its_own_progress_from_0_and_its_quant_is_named(ladder, measured, tmp_path):
    """The rate and ETA were carried from one rung into the next (`3/3 items, 43 s/item` for a rung
    that took 40.9 s): each reference pass is its own line, from 0; a fake run's quant was printed "()"."""
    from abricot_local.console import ProgressLine

    got, calls = measured
    assert [r.quant for r in got] == ["Q8_0", "Q4_0", "Q4_0"]
    names = list(dict.fromkeys(c[0] for c in calls))  # a line of its own per reference pass, naming its rungs
    assert names == ["discotex (Q8_0, Q4_0)", "discotex (Q4_0)"], names
    assert [c[1:] for c in calls if c[0] == names[1]] == [(0, 3), (1, 3), (2, 3), (3, 3)]  # from 0
    clock = iter([0.0, 40.0, 40.9, 41.9]).__next__  # the first pass slow, the second fast
    lines = ProgressLine(0.0, clock=clock)
    shown = [lines.update(*c) for c in calls if c[1] in (0, c[2])]
    assert shown[1].endswith("4/4 items, 0.10 items/s") and shown[3].endswith("3/3 items, 3.00 items/s"), shown
    out = _copy(ladder, tmp_path)
    r = invoke("kld", out / "t-f16", out / "t-q4_0", "--limit", "1")
    assert r.exit_code == 0 and f"{out / 't-q4_0'} (Q4_0) discotex: KLD mean" in r.output, r.output
    assert "()" not in r.output


def test_a_missing_model_file_says_what_kld_can_do(tmp_path):
    """kld said "give it with --model" (check's option): kld has none."""
    import shutil
    from pathlib import Path

    ref = Path(__file__).parent / "reference" / "gemma-3-270m"
    for name in ("a", "b"):
        shutil.copytree(ref, tmp_path / name)
        doc = json.loads((tmp_path / name / "results.json").read_text())
        doc["model"]["path"] = str(tmp_path / "gone.gguf")
        (tmp_path / name / "results.json").write_text(json.dumps(doc), encoding="utf-8")
    r = invoke("kld", tmp_path / "a", tmp_path / "b")
    assert r.exit_code == 2 and "--model" not in r.output, r.output
    assert f"{tmp_path / 'gone.gguf'}" in r.output and f"{tmp_path / 'a'}" in r.output
    assert "put the file back there" in r.output


def test_a_linked_kld_json_is_refused_before_any_model_loads(ladder, tmp_path, monkeypatch):
    from abricot_local.run import kld

    out = _copy(ladder, tmp_path)
    (tmp_path / "mine.json").write_text("{}\n")
    (out / "t-q4_0" / "kld.json").symlink_to(tmp_path / "mine.json")
    monkeypatch.setattr(kld, "open_backend", lambda plan: pytest.fail("a model loaded"))  # was after the passes
    r = invoke("kld", out / "t-f16", out / "t-q8_0", out / "t-q4_0")
    assert r.exit_code != 0 and "kld.json is a symbolic link" in r.output, r.output
    assert (tmp_path / "mine.json").read_text() == "{}\n" and not (out / "t-q8_0" / "kld.json").exists()


@pytest.mark.parametrize("signum", ["SIGINT", "SIGTERM"])
def test_kld_stops_on_a_signal_with_130(ladder, signum):
    """Ctrl-C ended kld with 1 and click's "Aborted!"; SIGTERM killed it without a word."""
    child, out = SIGNALLED[signum]
    driver = child.result()
    assert driver.returncode == 0, driver.stderr
    got = json.loads(driver.stdout)
    err = got["err"]
    assert got["returncode"] == 130, err
    assert "Aborted!" not in err and "Traceback" not in err and "kld interrupted" in err
    assert (out / "t-q8_0" / "kld.json").is_file() and not (out / "short-q4_0" / "kld.json").exists()


def test_kld_dry_run_counts_the_passes_and_tokens_kld_then_decodes(ladder, measured, tmp_path):
    """`kld --dry-run`: the reference passes, each pass's tokens, decode calls and rows compared as the
    command then does them (`measured`: the same kld on another copy), nothing written; a time once each model
    has a calibration."""
    out = _copy(ladder, tmp_path)
    runs = [out / n for n in ("t-q8_0", "t-q4_0", "short-q4_0")]
    r = invoke("kld", out / "t-f16", *runs, "--dry-run", "--json")
    assert r.exit_code == 0, r.output
    plan = json.loads(r.stdout)
    assert [p["runs"] for p in plan["passes"]] == [[str(runs[0]), str(runs[1])], [str(runs[2])]]
    assert plan["seconds"] is None and "no calibration" in plan["model"]["speed_note"]
    assert not list(out.rglob("kld.json"))  # nothing written
    got, _ = measured
    assert [r.run.name for r in got] == [p.name for p in runs]
    for p, res in zip(plan["passes"], (got[0], got[2])):
        (t,) = p["tasks"]
        assert (t["items"], t["decode_calls"]) == (res.tasks["discotex"].n_items, res.decode_calls)
        assert t["tokens"] < res.tasks["discotex"].n_tokens  # each item's cached prefix decoded once, counted in each
        assert t["rows_compared"] == t["tokens"] * len(p["runs"]) and p["compare_row_s"] > 0
    for name in ("t-f16", "t-q8_0", "t-q4_0"):  # each model calibrated: the time of each pass, the total
        cal = invoke("run", name, "--models", ladder[1], "--tasks", "discotex", "--data-dir", ladder[0].parent / "d",
                     "--dry-run", "--calibrate")
        assert cal.exit_code == 0, cal.output
    plan = json.loads(invoke("kld", out / "t-f16", *runs, "--dry-run", "--json").stdout)
    assert plan["seconds"] == pytest.approx(plan["model"]["speed"]["load_s"] + sum(p["seconds"] for p in plan["passes"]))
    assert all(p["seconds"] > p["compare_seconds"] > 0 for p in plan["passes"])
    text = invoke("kld", out / "t-f16", *runs, "--dry-run").stdout
    assert "3 runs in 2 reference passes" in text and "pass 2 of 2: Q4_0" in text and re.search(r"total: (~|<)\d", text), text
