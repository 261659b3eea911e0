"""ABRICOT on its real release, as the two published harnesses built it (issue 27).

The reference contexts are built here from PROTOCOL.md's rule ("How the two published sources ran
it"), not from the package: the release read with the csv module, the prompts typed by hand
(test_abricot.py's TEMPLATES), lm-eval's default sampler written out as lm-eval has it (one
``random.Random(1234)`` per task; per document, in file order, ``rnd.sample(docs, K + 1)``, the
document itself dropped by equality, the first K kept). The data is the real release, found or
fetched once by tests/realdata.py (the pinned public file, SHA-256 verified).
"""

from __future__ import annotations

import csv
import http.server
import json
import random
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from abricot_local.analysis import baselines
from abricot_local import console
from abricot_local.models import fetch
from abricot_local.cli import cli
from abricot_local.errors import DataError, MissingDataError
from abricot_local.analysis.baselines import protocols_named
from abricot_local.tasks.selection import instances, prepare
from abricot_local.run.request import Shard
from abricot_local.record import Published, TaskEntry
from abricot_local.tasks import abricot_data, make_task
from abricot_local.tasks.abricot import AbricotAbsTask
from abricot_local.tasks.base import TaskOptions
from conftest import fail_after
from test_abricot import TEMPLATES

PINNED_SHA256 = "5dfe6577961b20d8b1fd3439ed32152fdf615963dd93ca925c912aa19f136eac"  # the release, as published
TRAILING_SPACE = {"OROLOGIO_1", "OROLOGIO_3", "OROLOGIO_4", "CAMERIERE_2", "SAGGEZZA_2", "STRATEGIA_3"}
# PROTOCOL.md: paper = prompts paper, lm-eval's --num_fewshot 3; leaderboard = prompts calamita, 0-shot
HARNESS = {"paper": ("paper", 3), "calamita": ("calamita", 0)}
MEAN = {"abs": "abs_mean", "inc": "inc_mean"}


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def release_docs(path: Path) -> list[dict]:
    with open(path, encoding="utf-8-sig", newline="") as fh:
        return list(csv.DictReader(fh))


def doc_to_text(kind: str, variant: str, doc: dict) -> str:
    return TEMPLATES[(kind, variant)].replace("{parola}", doc["target_token"]).replace("{frase}", doc["text"])


def doc_to_target(kind: str, doc: dict) -> str:
    return ["1", "2", "3", "4", "5"][min(round(5 * float(doc[MEAN[kind]])), 4)]


def harness_contexts(kind: str, protocol: str, docs: list[dict]) -> list[str]:
    """Each document's context as lm-eval v0.4.4 builds it with --num_fewshot K (default sampler)."""
    variant, k = HARNESS[protocol]
    rnd = random.Random(1234)
    out = []
    for doc in docs:
        shots = []
        if k:
            drawn = rnd.sample(docs, k + 1)
            shots = [d for d in drawn if d != doc][:k]
        labeled = "".join(doc_to_text(kind, variant, s) + " " + doc_to_target(kind, s) + "\n\n" for s in shots)
        out.append(labeled + doc_to_text(kind, variant, doc))
    return out


def task(kind: str, protocol: str | None, path: Path, **kw):
    name = "abricot_abs" if kind == "abs" else "abricot_inc"
    return make_task(name, TaskOptions(data=(("abricot", str(path)),), protocol=protocol, **kw))


# ---------------------------------------------------------------- the release as published


def test_the_release_loads_as_published(abricot_file):
    from abricot_local.models import fetch

    assert fetch.sha256_file(abricot_file) == PINNED_SHA256
    raw = abricot_file.read_bytes()
    assert raw.startswith(b"\xef\xbb\xbf") and b"\r\n" in raw  # BOM, CRLF: read as they are
    docs = release_docs(abricot_file)
    rows, bad_spans = abricot_data.load_rows(abricot_file)
    assert len(rows) == 127 and bad_spans == 0  # `end` inclusive on every row
    assert [r.id for r in rows] == [d["ID"] for d in docs]
    assert [r.text for r in rows] == [d["text"] for d in docs]  # byte for byte: not stripped
    assert {r.id for r in rows if r.text.endswith(" ")} == TRAILING_SPACE
    assert {r.domain for r in rows} == {"opensub", "wikihow"}


@pytest.mark.parametrize("protocol", ["paper", "calamita"])
@pytest.mark.parametrize("kind", ["abs", "inc"])
def test_every_context_is_the_harness_one_byte_for_byte(abricot_file, kind, protocol):
    docs = release_docs(abricot_file)
    want = harness_contexts(kind, protocol, docs)
    t = task(kind, protocol, abricot_file)
    items = t.items()
    assert [it.id for it in items] == [d["ID"] for d in docs]
    for it, doc, ctx in zip(items, docs, want):
        assert it.context.encode("utf-8") == ctx.encode("utf-8"), it.id
        assert it.continuations == (" 1", " 2", " 3", " 4", " 5")
        assert it.choices[it.gold] == doc_to_target(kind, doc)
    for it, doc in zip(items, docs):
        if doc["ID"] in TRAILING_SPACE:  # the harness keeps the space: ". \n" in the prompt
            assert doc["text"].endswith(". ") and doc["text"] + "\nDescrizione dei valori:" in it.context
    settings = t.config()
    assert settings["protocol"] == protocol and settings["protocol_differences"] == []
    assert settings["shots"] == HARNESS[protocol][1] and settings["prompt_variant"] == HARNESS[protocol][0]
    if protocol == "paper":  # every item its own draw (BENZINA_4 and EFFETTO_2 happen to draw the same 3)
        assert len({it.prefix for it in items}) == 126 and settings["shot_sampler"] == "lm-eval"
        assert t.key == t.name
    else:
        # the cached prefix runs to the blank line before "Rispondi...": each item its own
        assert all(it.context[len(it.prefix):].startswith("Rispondi esclusivamente") for it in items)
        assert t.key == f"{t.name}@calamita"


def test_abs_and_inc_draw_the_same_shots_each_with_its_own_generator(abricot_file):
    a, i = (task(k, "paper", abricot_file).items() for k in ("abs", "inc"))
    assert [x.fields["shot_ids"] for x in a] == [x.fields["shot_ids"] for x in i]
    assert all(x.id not in x.fields["shot_ids"] and len(set(x.fields["shot_ids"])) == 3 for x in a)


def test_the_default_is_the_paper_protocol_and_a_flag_is_named_where_it_differs(abricot_file):
    default = task("abs", None, abricot_file)
    paper = task("abs", "paper", abricot_file)
    assert [x.context for x in default.items()] == [x.context for x in paper.items()]
    shared = task("abs", None, abricot_file, shot_sampler="shared")
    cfg = shared.config()
    assert cfg["protocol"] == "paper" and cfg["protocol_differences"] == ["shot_sampler shared, published lm-eval"]
    assert len(cfg["shot_ids"]) == 3
    zero = task("abs", "calamita", abricot_file, shots=3)
    assert zero.config()["protocol_differences"] == ["shots 3, published 0"]


# ---------------------------------------------------------------- shots never depend on the selection


def test_shots_are_the_same_under_sample_limit_and_shard(abricot_file):
    full = {it.id: it.context for it in task("abs", "paper", abricot_file).items()}
    for kw in ({"sample": 20}, {"limit": 7}, {"sample": 20, "shard": Shard(2, 3)}, {"shard": Shard(3, 4)}):
        run = prepare([task("abs", "paper", abricot_file)], kw.get("limit"), kw.get("sample"), kw.get("shard"))[0]
        assert run.items and all(it.context == full[it.id] for it in run.items), kw
    sampled = prepare([task("abs", "paper", abricot_file)], None, 20)[0].items
    assert len(sampled) == 20 and len({it.id for it in sampled}) == 20


def test_shots_are_the_same_after_an_interrupted_run_is_resumed(abricot_file, tmp_path, monkeypatch):
    full = {it.id: it.context for it in task("abs", "paper", abricot_file).items()}
    base = ["run", "fake", "--backend", "fake", "--data", f"abricot={abricot_file}", "--tasks", "abricot_abs",
            "--sample", "20", "--n-ctx", "8192"]
    out = tmp_path / "o"
    fail_after(monkeypatch, 7, KeyboardInterrupt)
    assert invoke(*base, "--out", out).exit_code == 130
    monkeypatch.undo()
    r = invoke(*base, "--out", out, "--resume")
    assert r.exit_code == 0, r.output
    lines = [json.loads(x) for x in (out / "samples-abricot_abs.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(lines) == 20 and all(s["context"] == full[s["id"]] for s in lines)
    whole = tmp_path / "whole"
    assert invoke(*base, "--out", whole).exit_code == 0
    assert (whole / "samples-abricot_abs.jsonl").read_bytes() == (out / "samples-abricot_abs.jsonl").read_bytes()


# ---------------------------------------------------------------- a verdict only against a row made the same way

PAPER_CFG = {"prompt_variant": "paper", "shots": 3, "shot_sampler": "lm-eval", "seed": 1234, "chat_template": False,
             "protocol": "paper"}
CALAMITA_CFG = {**PAPER_CFG, "prompt_variant": "calamita", "shots": 0, "protocol": "calamita"}


def entry(config: dict, value=0.35, ci=(0.2, 0.5)) -> TaskEntry:
    return TaskEntry(metrics={"pearson": value, "pearson_ci95": list(ci)}, n=127, config=config)


def refs(source: str, model: str):
    return baselines.find(source, model)


def test_a_row_is_checked_only_against_the_instance_of_its_protocol():
    paper = [r for r in refs("ABRICOT paper", "llama-3.1-8b") if r.task == "abricot_abs"][0]
    board = [r for r in refs("CALAMITA leaderboard", "Llama-3.1-8B-Instruct") if r.task == "abricot_abs"][0]
    both = {"abricot_abs": entry(PAPER_CFG), "abricot_abs@calamita": entry(CALAMITA_CFG, 0.1, (0.0, 0.15))}
    c = baselines.check_run(paper, both)
    assert c.key == "abricot_abs" and c.comparable and c.inside is True and c.precision == ""
    c = baselines.check_run(board, both)
    assert c.key == "abricot_abs@calamita" and c.comparable and c.inside is False and c.precision == "bf16 (vLLM)"
    # a run holding only the paper's instance: the leaderboard row is not comparable, never "no"
    c = baselines.check_run(board, {"abricot_abs": entry(PAPER_CFG, 0.9, (0.85, 0.95))})
    assert not c.comparable and c.inside is None
    assert c.differences == ("prompt_variant paper, published calamita", "shots 3, published 0")
    assert "not comparable: prompt_variant paper, published calamita; shots 3, published 0" in c.text
    rec = c.to_record()
    assert rec.comparable is False and rec.inside is None and rec.precision == "bf16 (vLLM)"
    # a setting a run of an earlier version did not record differs as "not recorded"
    old = {k: v for k, v in PAPER_CFG.items() if k not in ("shot_sampler", "protocol")}
    c = baselines.check_run(paper, {"abricot_abs": entry(old)})
    assert c.differences == ("shot_sampler not recorded, published lm-eval",) and c.inside is None


def test_the_verdict_text_gives_each_source_its_block_and_never_says_no_to_another_protocol():
    board = [r for r in refs("CALAMITA leaderboard", "Llama-3.1-8B-Instruct") if r.task == "abricot_abs"][0]
    paper = [r for r in refs("ABRICOT paper", "llama-3.1-8b") if r.task == "abricot_abs"][0]
    tasks = {"abricot_abs": entry(PAPER_CFG, 0.9, (0.85, 0.95))}
    checks = tuple(baselines.check_run(r, tasks).to_record() for r in (paper, board))
    text = console.verdict(Published(reproduces="x", checks=checks), "Q4_K_M")
    assert "paper 3-shot (protocol paper): the published precision is not stated; this run Q4_K_M" in text
    assert "CALAMITA leaderboard (protocol calamita): published precision bf16 (vLLM); this run Q4_K_M" in text
    row = next(x for x in text.splitlines() if "Llama-3.1-8B-Instruct" in x)
    assert row.rstrip().endswith("not comparable") and not {"NO", "no", "yes"} & set(row.split())
    assert "made otherwise: prompt_variant paper, published calamita; shots 3, published 0" in text
    row = next(x for x in text.splitlines() if "llama-3.1-8b " in x)
    assert row.rstrip().endswith("outside the 95% CI")  # a check with no verdict (no samples): the CI answer


def test_instances_are_keyed_by_task_and_protocol(abricot_file):
    opts = TaskOptions(data=(("abricot", str(abricot_file)),))
    both = "ABRICOT paper: llama-3.1-8b; CALAMITA leaderboard: Llama-3.1-8B-Instruct"
    made = instances([make_task("abricot_abs", opts), make_task("abricot_inc", opts)], protocols_named(both))
    assert [t.key for t in made] == ["abricot_abs", "abricot_abs@calamita", "abricot_inc", "abricot_inc@calamita"]
    only = instances([make_task("abricot_abs", opts)], protocols_named("CALAMITA leaderboard: Minerva-7B-instruct-v1.0"))
    assert [t.key for t in only] == ["abricot_abs@calamita"]
    given = TaskOptions(data=opts.data, protocol="paper")
    assert [t.key for t in instances([make_task("abricot_abs", given)], protocols_named(both))] == ["abricot_abs"]
    # flags that make both instances alike: it runs once
    alike = TaskOptions(data=opts.data, shots=0, prompt_variant="calamita")
    assert [t.key for t in instances([make_task("abricot_abs", alike)], protocols_named(both))] == ["abricot_abs"]
    assert make_task("abricot_abs@calamita", opts).config()["protocol"] == "calamita"


def test_the_headline_scores_abricot_both_ways_in_one_command(abricot_file, tmp_path):
    """`run MODEL` whose entry reproduces both sources: 2 tasks x 127 items at 3 shots and at 0, each
    source its own verdict, exact on every item; `check` re-scores every instance (the fake backend under the
    entry)."""
    models = tmp_path / "models.toml"
    models.write_text('[fake-as-llama]\nbackend = "fake"\nreproduces = "ABRICOT paper: llama-3.1-8b; '
                      'CALAMITA leaderboard: Llama-3.1-8B-Instruct"\n', encoding="utf-8")
    out = tmp_path / "o"
    r = invoke("run", "fake-as-llama", "--models", models, "--data", f"abricot={abricot_file}", "--tasks", "abricot",
               "--n-ctx", "8192", "--out", out)
    assert r.exit_code == 0, r.output
    res = json.loads((out / "results.json").read_text())
    keys = ["abricot_abs", "abricot_abs@calamita", "abricot_inc", "abricot_inc@calamita"]
    assert list(res["tasks"]) == keys and res["config"]["tasks"] == keys
    for key in keys:
        cfg = res["tasks"][key]["config"]
        assert res["tasks"][key]["n"] == 127 and cfg["shots"] == (0 if "@" in key else 3)
        assert cfg["protocol"] == ("calamita" if "@" in key else "paper") and (out / f"samples-{key}.jsonl").is_file()
    checks = res["published"]["checks"]
    assert len(checks) == 4 and all(c["comparable"] for c in checks)
    assert {(c["task"], c["source"]) for c in checks} == {
        ("abricot_abs", "paper 3-shot"), ("abricot_inc", "paper 3-shot"),
        ("abricot_abs@calamita", "CALAMITA leaderboard"), ("abricot_inc@calamita", "CALAMITA leaderboard")}
    assert "CALAMITA leaderboard (protocol calamita): published precision bf16 (vLLM)" in r.output
    assert "not comparable" not in r.output
    # every row of the release (was test_intervals' own run of it): the run's value is the set's, so each published
    # row gets "reproduced within M" or "differs by d", never "this task cannot settle M", and the interval for
    # items like these on a line of its own
    lines = r.stdout.splitlines()
    for c in checks:
        assert c["n"] == c["items_total"] == 127 and c["verdict"] in ("reproduced", "differs")
        d = c["value"] - c["published"]
        assert c["ci90"] == pytest.approx([d - 0.005, d + 0.005])  # exact, the published value's rounding allowed
        head = f"differs by {d:+.3f}" if c["verdict"] == "differs" else f"reproduced within {c['margin']:g}"
        assert c["reasons"][0].startswith(head + ": ") and "on all 127 items of the task (exact" in c["reasons"][0]
        assert c["reasons"][1].startswith("items like these (whether the model generalises): run - published 90% CI")
        at = next(k for k, x in enumerate(lines) if f"{c['task']}.pearson" in x and c["reference"] in x)
        assert head in lines[at] and "cannot settle" not in lines[at]
        assert lines[at + 2].strip() == c["reasons"][1]  # its own line, under the exact figures
    c = invoke("check", out, "--sample", "3")
    assert c.exit_code == 0, c.output
    # --protocol calamita: the paper's rows are shown, not comparable, each difference named
    r = invoke("run", "fake-as-llama", "--models", models, "--data", f"abricot={abricot_file}", "--tasks",
               "abricot_abs", "--protocol", "calamita", "--sample", "5", "--n-ctx", "8192", "--out", tmp_path / "c")
    assert r.exit_code == 0, r.output
    res = json.loads((tmp_path / "c" / "results.json").read_text())
    assert list(res["tasks"]) == ["abricot_abs@calamita"]
    paper = next(c for c in res["published"]["checks"] if c["source"] == "paper 3-shot")
    assert paper["comparable"] is False and paper["inside"] is None
    assert paper["differences"] == ["prompt_variant calamita, published paper", "shots 0, published 3"]
    assert "made otherwise: prompt_variant calamita, published paper; shots 0, published 3" in r.output


def test_an_unknown_protocol_is_refused_in_one_line(abricot_file):
    r = invoke("run", "fake", "--backend", "fake", "--data", f"abricot={abricot_file}", "--tasks", "abricot_abs",
               "--protocol", "leaderboard", "--dry-run")
    assert r.exit_code != 0 and "has no protocol 'leaderboard'" in r.output and "paper, calamita" in r.output


# ---------------------------------------------------------------- the pull (network on 127.0.0.1) and offline


class _Serve(http.server.BaseHTTPRequestHandler):
    body = b""

    def do_GET(self):  # noqa: N802
        self.send_response(200)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Serve)
    threading.Thread(target=httpd.serve_forever, args=(0.01,), daemon=True).start()  # shutdown() in 10 ms, not 0.5 s
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def test_pull_downloads_the_pinned_file_and_the_run_finds_it(abricot_file, server, monkeypatch):
    _Serve.body = abricot_file.read_bytes()
    url = f"http://127.0.0.1:{server.server_port}/aramelior/{abricot_data.RELEASE_COMMIT}/dataset_it.csv"
    monkeypatch.setattr(abricot_data, "RELEASE_URL", url)
    monkeypatch.delenv("ABRICOT_OFFLINE")
    monkeypatch.delenv("HF_HUB_OFFLINE")
    r = invoke("data", "pull", "abricot")
    assert r.exit_code == 0, r.output
    cached = fetch.cache_dir() / "data" / "abricot" / "dataset_it.csv"
    assert cached.read_bytes() == abricot_file.read_bytes()
    monkeypatch.setenv("ABRICOT_OFFLINE", "1")
    assert AbricotAbsTask(TaskOptions()).data_path() == cached and len(AbricotAbsTask(TaskOptions()).items()) == 127


def test_pull_refuses_a_file_that_is_not_the_release(abricot_file, server, monkeypatch):
    _Serve.body = abricot_file.read_bytes().replace(b"OROLOGIO_1", b"OROLOGIO_0")
    monkeypatch.setattr(abricot_data, "RELEASE_URL", f"http://127.0.0.1:{server.server_port}/dataset_it.csv")
    monkeypatch.delenv("ABRICOT_OFFLINE")
    monkeypatch.delenv("HF_HUB_OFFLINE")
    with pytest.raises(MissingDataError) as err:
        AbricotAbsTask(TaskOptions()).items()
    assert "sha256 mismatch, expected " + abricot_data.RELEASE_SHA256 in str(err.value)
    assert not list((fetch.cache_dir() / "data" / "abricot").glob("*.csv"))


def test_offline_the_message_names_the_file_the_url_and_the_option():
    with pytest.raises(MissingDataError) as err:
        AbricotAbsTask(TaskOptions()).items()
    text = str(err.value)
    folder, name = abricot_data.RELEASE_URL.rsplit("/", 1)
    lines = [ln.strip() for ln in text.splitlines()]
    assert folder + "/" in lines and name in lines  # where it is published, the file under its URL's folder
    assert 'data={"abricot": FILE}' in text and "abricot-local data pull abricot" in text  # Python's words
    assert text.count(folder) == 1  # the URL once


# ---------------------------------------------------------------- NUL bytes (issue 29, item 9)


@pytest.mark.parametrize("column", ["text", "target_token"])
def test_a_nul_byte_is_refused_naming_the_line(abricot_file, tmp_path, column):
    import io

    docs = release_docs(abricot_file)
    docs[3][column] = docs[3][column][:3] + "\x00" + docs[3][column][3:]  # file line 5: the 4th record
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(docs[0]), lineterminator="\r\n")
    writer.writeheader()
    writer.writerows(docs)
    bad = tmp_path / "dataset_it.csv"
    bad.write_bytes(b"\xef\xbb\xbf" + buf.getvalue().encode("utf-8"))
    with pytest.raises(DataError) as err:
        abricot_data.load_rows(bad)
    msg = str(err.value)
    assert "line 5" in msg and f"column {column}" in msg and "NUL" in msg and "\x00" not in msg and "\n" not in msg
    with pytest.raises(DataError):  # and the task surfaces it
        AbricotAbsTask(TaskOptions(data=(("abricot", str(bad)),))).items()
