"""Names and values a hostile or unlucky user gives (issue 29, items 6, 7a and 10): terminal escapes
and newlines in store folders and model names, HTML in markdown tables, a 10 MB model name, lm-eval's
numbers for integer options, a reversed CI and a ``/`` in a metric name in the figures, an offline dry
run that plans a download, a split model missing a part. Fake backend, tmp folders, no network."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import struct
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from abricot_local.models import locate as modellocate
from abricot_local.cli import cli
from abricot_local.report.safe import markup, visible
from abricot_local.errors import ModelError, UsageError
from conftest import FIXTURE

GGUF = b"GGUF" + struct.pack("<IQQ", 3, 0, 0)
SHA = hashlib.sha256(GGUF).hexdigest()
FAKE = ("--backend", "fake", "--tasks", "abricot", "--data", f"abricot={FIXTURE}", "--n-ctx", "8192", "--limit", "4")
EVIL = "ev\x1b[31mil\x1b]0;pwned\x07\u202eman\nrm -rf\r\x9b2J"  # SGR, OSC title, bidi override, newline, CR, C1 CSI
ACTIVE = ("\x1b", "\x07", "\u202e", "\r", "\x9b")


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def harmless(text: str) -> None:
    for c in ACTIVE:
        assert c not in text, (c, text[:400])




def test_visible_escapes_what_a_terminal_would_act_on():
    assert visible(EVIL) == "ev\\x1b[31mil\\x1b]0;pwned\\x07\\u202eman\\nrm -rf\\r\\x9b2J"
    assert visible("a\nb\tc\x1b", newlines=True) == "a\nb\tc\\x1b"
    assert visible("città ü 日本 — ok/x_y.gguf") == "città ü 日本 — ok/x_y.gguf"  # text is left alone
    assert markup('<img src=x onerror="alert(1)"> | <script>') == \
        '&lt;img src=x onerror="alert(1)"&gt; \\| &lt;script&gt;'


# -- item 6: store folders, model names, the plan, the report ------------------------------------------------
def test_escapes_in_store_folders_and_file_names_are_shown_not_acted_on(home, tmp_path):
    folder = tmp_path / "models" / "pub\x1b[2J"
    folder.mkdir(parents=True)
    (folder / "tiny\x1b]0;x\x07\nQ4_0.gguf").write_bytes(GGUF)
    root = home / ".ollama" / "models"
    (root / "blobs").mkdir(parents=True)
    (root / "blobs" / f"sha256-{SHA}").write_bytes(GGUF)
    man = root / "manifests" / "registry.ollama.ai" / "library" / "na\x1b[5mme" / "la\ntest"
    man.parent.mkdir(parents=True)
    man.write_text(json.dumps({"schemaVersion": 2, "layers": [
        {"mediaType": "application/vnd.ollama.image.model", "digest": f"sha256:{SHA}", "size": 1}]}))
    r = invoke("models", "--local", "--model-dir", tmp_path / "models")
    assert r.exit_code == 0, r.output
    harmless(r.output)
    assert "tiny\\x1b]0;x\\x07\\nQ4_0.gguf" in r.output and "ollama:na\\x1b[5mme:la\\ntest" in r.output
    rows = [ln for ln in r.output.splitlines() if ln.startswith(("ollama", "model-dir"))]
    assert len(rows) == 2  # one line each: no newline of a name breaks its row


def test_the_plan_and_errors_show_escapes(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["abricot-local", "run", EVIL, "--backend", "fake", "--dry-run"])
    r = invoke("run", EVIL, *FAKE, "--dry-run")
    assert r.exit_code == 0, r.output
    harmless(r.output)
    (head,) = [ln for ln in r.output.splitlines() if ln.startswith("plan of:")]
    from abricot_local.errors import shell_word

    assert shell_word(EVIL) in head and shell_word(EVIL).startswith("$'")  # a command pasted gives the name back
    assert [ln for ln in r.output.splitlines() if ln.startswith(visible(EVIL)[:20])]  # the model's row, one line
    r = invoke("run", "ollama:" + EVIL)  # an error naming the model
    assert r.exit_code == 2 and "error:" in r.output
    harmless(r.output)


@pytest.fixture
def hostile_run(finished_run, tmp_path) -> Path:
    """A finished fake run whose model is named with escapes, a newline and HTML (a copy: tests edit it)."""
    name = EVIL + '<img src=x onerror="alert(1)"><script>alert(2)</script>'
    return finished_run("run", name, *FAKE, into=tmp_path / "run")


def test_report_text_csv_and_markdown_are_harmless(hostile_run):
    text = invoke("report", hostile_run, "--table", "runs")
    assert text.exit_code == 0, text.output
    harmless(text.stdout)
    assert "\\x1b[31m" in text.stdout
    rows = list(csv.DictReader(io.StringIO(invoke("report", hostile_run, "--format", "csv").stdout)))
    assert len(rows) >= 1 and rows[0]["label"].startswith("ev\\x1b[31mil") and "\\n" in rows[0]["label"]
    harmless(json.dumps(rows, ensure_ascii=False))
    md = invoke("report", hostile_run, "--format", "markdown", "--table", "runs").stdout
    harmless(md)
    assert "<img" not in md and "<script>" not in md and "&lt;script&gt;alert(2)&lt;/script&gt;" in md
    table_rows = [ln for ln in md.splitlines() if ln.startswith("| ev")]
    assert len(table_rows) == 1  # the newline of the name does not break the markdown row


# -- item 7a: a 10 MB model name ----------------------------------------------------------------------------------
def test_a_cell_is_cut_in_linear_time():
    from abricot_local.report import texttable

    word = "x" * 2_000_000  # quadratic slicing took minutes for 10 MB
    pieces = texttable._cut(word, 36)
    assert "".join(pieces) == word and max(map(len, pieces)) == 36
    import pandas as pd

    text, _ = texttable.fit(pd.DataFrame({"model": [word], "folder": ["/x"]}), wrap_cols=("model",))
    assert len(text) < 2000 and "(+1,999,760 characters; the markdown, csv and json formats show it whole)" in \
        " ".join(text.split())
    # markdown shows every cell whole but a hostile one past MARKDOWN_MAX
    assert "... (+1,900,000 characters; the csv and json formats show it whole)" in \
        texttable.grid(pd.DataFrame({"m": [word]}), True)


def test_a_10_mb_model_name_gives_a_short_report(hostile_run):
    path = hostile_run / "results.json"
    doc = json.loads(path.read_text())
    huge = "m" * 10_000_000
    doc["model"]["label"] = huge
    for key in ("name", "alias"):
        if isinstance(doc["model"].get(key), str):
            doc["model"][key] = huge
    path.write_text(json.dumps(doc))
    r = invoke("report", hostile_run)  # was past 500 s
    assert r.exit_code == 0, r.output
    assert len(r.stdout) < 50_000 and "characters; the markdown, csv and json formats show it whole)" in \
        " ".join(r.stdout.split())


# -- item 10: lm-eval's numbers for integer options --------------------------------------------------------------
@pytest.mark.parametrize("key, value, words", [
    ("n_ctx", -5.0, "model_args n_ctx must be at least 1, got -5"),
    ("threads", -2.0, "model_args threads must be at least 1, got -2"),
    ("n_gpu_layers", -5.0, "model_args n_gpu_layers must be at least -1, got -5"),
    ("n_ctx", 2.5, "model_args n_ctx must be an integer, got 2.5 (not a whole number)"),
    ("n_batch", float("inf"), "model_args n_batch must be an integer, got inf"),
    ("n_ctx", 1e300, "model_args n_ctx must be an integer written in digits"),
    ("n_ctx", "abc", "model_args n_ctx: expected an integer, got 'abc'"),
])
def test_lm_eval_numbers_for_integer_options_say_what_is_wrong(key, value, words):
    from abricot_local.backends import backend_options
    from abricot_local.lm_eval.requests import model_arg

    with pytest.raises(UsageError) as err:
        backend_options("llama.cpp", {key: value})
    said = str(err.value.said_by(model_arg))  # what the lm-eval model says of it
    assert said == words or said.startswith(words), said


def test_lm_eval_seed_1e3_is_the_integer_1000():
    from abricot_local.backends import backend_options

    opts = backend_options("llama.cpp", {"seed": 1e3, "n_ctx": 4096.0})
    assert (opts.seed, opts.n_ctx) == (1000, 4096) and isinstance(opts.seed, int)


# -- item 10: figures --------------------------------------------------------------------------------------------------
def test_a_reversed_ci_is_named_and_a_slash_stays_in_the_plot_folder(hostile_run, tmp_path):
    pytest.importorskip("matplotlib")
    from abricot_local.report import plots, tables as report

    path = hostile_run / "results.json"
    doc = json.loads(path.read_text())
    task = next(t for t, e in doc["tasks"].items() if "accuracy_ci95" in e["metrics"])
    metrics = doc["tasks"][task]["metrics"]
    metrics["accuracy"], metrics["accuracy_ci95"] = 0.5, [0.9, 0.1]
    metrics["../../a/b"], metrics["../../a/b_ci95"] = 0.5, [0.4, 0.6]
    path.write_text(json.dumps(doc))
    figs = plots.write_plots(report.build([str(hostile_run)]), tmp_path / "figs", metrics=("accuracy", "../../a/b"))
    notes = " ".join(figs.notes)
    assert "[0.900, 0.100] is reversed" in notes and "no whisker" in notes
    assert all(p.parent == tmp_path / "figs" for p in figs.paths)
    assert len({p.name for p in figs.paths}) == len(figs.paths)
    assert any("a_b" in p.name for p in figs.paths) and not (tmp_path / "a").exists()


# -- item 10: offline dry runs, split models missing a part ---------------------------------------------------------
def test_an_offline_dry_run_plans_the_download_the_run_refuses(home, tmp_path, monkeypatch):
    user = tmp_path / "m.toml"
    user.write_text('[tiny-hf]\nsource = "hf"\nrepo = "org/Tiny-GGUF"\nfile = "tiny-Q4_K_M.gguf"\n'
                    'revision = "0123456789abcdef0123456789abcdef01234567"\n')
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("ABRICOT_OFFLINE")
    dry = invoke("run", "tiny-hf", "--models", user, "--tasks", "abricot", "--data", f"abricot={FIXTURE}", "--dry-run")
    real = invoke("run", "tiny-hf", "--models", user, "--tasks", "abricot", "--data", f"abricot={FIXTURE}",
                  "--out", tmp_path / "o")
    assert real.exit_code != 0 and "cannot be downloaded now" in real.output, real.output
    # a dry run downloads nothing: it plans the model all the same and says the run would refuse (issue 39, item 8)
    assert dry.exit_code == 0 and "download:" in dry.output, dry.output
    assert "offline: the run itself would refuse this download" in dry.output and "cannot be downloaded now" in \
        dry.output, dry.output
    r = invoke("run", "hf:org/Other-GGUF", "--tasks", "abricot", "--data", f"abricot={FIXTURE}", "--dry-run")
    # (the plan folds its lines at 120 columns: where depends on the tmp folder's length and the free disk space)
    assert r.exit_code == 0 and "download:" in r.output and "downloads are off (offline)" in \
        " ".join(r.output.split()), r.output


def test_a_split_model_missing_a_part_names_it(home, tmp_path):
    snap = tmp_path / "hf" / "models--org--Big-GGUF" / "snapshots" / ("c" * 40)
    snap.mkdir(parents=True)
    (snap / "big-Q4_K_M-00001-of-00003.gguf").write_bytes(GGUF)
    (snap / "big-Q4_K_M-00003-of-00003.gguf").write_bytes(GGUF)
    (snap.parents[1] / "refs").mkdir()
    (snap.parents[1] / "refs" / "main").write_text("c" * 40)
    with pytest.raises(ModelError, match=r"lacks part\(s\) big-Q4_K_M-00002-of-00003.gguf") as err:
        modellocate.resolve_model_ref("hf:org/Big-GGUF")
    assert "not in the Hugging Face cache" not in str(err.value)


def test_every_command_prints_through_the_one_visible_echo(capsys):
    """cli/ prints only through cli.app.echo, which makes the text visible (a name from outside in
    any message: a folder, a model, a task read from a results.json)."""
    import ast

    from abricot_local.cli.app import echo

    pkg = Path(__file__).resolve().parents[1] / "abricot_local" / "cli"
    direct = [f"{p.name}:{n.lineno}" for p in sorted(pkg.glob("*.py")) for n in ast.walk(ast.parse(p.read_text()))
              if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("echo", "secho")
              and isinstance(n.func.value, ast.Name) and n.func.value.id == "click"]
    own = echo.__code__.co_firstlineno + next(i for i, line in enumerate(
        (pkg / "app.py").read_text().splitlines()[echo.__code__.co_firstlineno - 1:]) if "click.echo(" in line)
    assert direct == [f"app.py:{own}"], direct  # echo's own call, the one
    echo(f"wrote {EVIL}\nnext line\tcol")
    echo(EVIL, err=True)
    out, err = capsys.readouterr()
    harmless(out + err)
    shown = visible(EVIL, newlines=True)  # a whole output: its newlines are lines
    assert out == f"wrote {shown}\nnext line\tcol\n" and err == shown + "\n"
