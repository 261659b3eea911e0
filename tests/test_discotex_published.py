"""DISCOTEX on the published rows (the hub dataset sapienzanlp/discotex, Parquet), its two wordings,
lm-eval's few-shot draw from the train split, and what the record says.

The Parquet files here are written by the tests with pyarrow in the hub's layout
(``data/test-00000-of-00001.parquet``, ``data/train-...``): INVENTED rows, not the dataset's.
The ITA-Bench reference contexts are built here from PROTOCOL.md's text (the YAML's description
and Jinja template, rendered by jinja2 as lm-eval renders it, and lm-eval's sampler over the
documents themselves), not from the tool's code.
"""

from __future__ import annotations

import inspect
import json
import random
import subprocess
from pathlib import Path

import pytest
import realdata
from click.testing import CliRunner
from conftest import Early

from abricot_local.cli import cli
from abricot_local.errors import DataError
from abricot_local.tasks import make_task
from abricot_local.tasks.base import TaskOptions

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

NONE = "nessuna delle precedenti"
SPEC = next((p for p in (realdata.GIVEN and realdata.GIVEN / "spec" / "PROTOCOL.md", realdata.SHARED / "spec" /
                          "PROTOCOL.md") if p and p.is_file()), realdata.SHARED / "spec" / "PROTOCOL.md")

# PROTOCOL.md, DISCOTEX, "A second public variant of the task: ITA-Bench": the description and the
# prompt exactly as written there (\n is a newline).
ITA_DESCRIPTION = ("Ti verranno poste delle domande nelle quali è presente un paragrafo, e come possibili risposte "
                   "varie frasi che possono essere o meno la continuazione del paragrafo.\\nIndica la frase che "
                   "rappresenta la continuazione più probabile del paragrafo, oppure \"nessuna delle precedenti\" se "
                   "nessuna delle continuazioni è corretta.\\n\\n")
ITA_TEMPLATE = ("Paragrafo: \"{{text}}\"\\nDomanda: Quali delle seguenti frasi è la continuazione più probabile del "
                "precedente paragrafo?\\nA. \"{{choices[0]}}\"\\nB. \"{{choices[1]}}\"\\nC. \"{{choices[2]}}\"\\n"
                "D. \"{{choices[3]}}\"\\nE. {{choices[4]}}\\nRisposta:")
# the task card's wording (PROTOCOL.md: "Description prepended to every prompt", "Prompt")
CARD_DESCRIPTION = ("Ti verranno poste delle domande, nelle quali è presente un paragrafo, e come possibili risposte "
                    "varie frasi che possono essere o meno il continuo.\\nIndica la frase che rappresenta la "
                    "continuazione del paragrafo oppure 'nessuna delle precedenti', se nessuna delle continuazioni è "
                    "corretta.")
CARD_PROMPT = ("Paragrafo: '{text}'\\nDomanda: Quali delle seguenti frasi presenta una continuazione del precedente "
               "paragrafo?\\nA. '{c0}'\\nB. '{c1}'\\nC. '{c2}'\\nD. '{c3}'\\nE. {c4}\\nRisposta:")


def unescape(text: str) -> str:
    return text.replace("\\n", "\n")


def test_the_reference_text_is_protocol_md_s():
    """The strings above are PROTOCOL.md's, character for character (when the spec is here)."""
    if not SPEC.is_file():
        pytest.skip("spec/PROTOCOL.md not here (tests/realdata.py): the reference strings are kept as copied from it")
    spec = SPEC.read_text(encoding="utf-8")
    for text in (ITA_DESCRIPTION, ITA_TEMPLATE, CARD_DESCRIPTION, CARD_PROMPT):
        assert f"`{text}`" in spec


def render_jinja(template: str, doc: dict) -> str:
    """lm-eval's utils.apply_template: a jinja2 Environment with keep_trailing_newline, no escaping."""
    jinja2 = pytest.importorskip("jinja2")
    env = jinja2.Environment(loader=jinja2.BaseLoader(), undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    return env.from_string(template).render(**doc)


# -- the invented rows, in the hub's layout ----------------------------------------------------------
def invented(split: str, n: int, seed: int) -> list[dict]:
    rnd = random.Random(seed)
    rows = []
    for k in range(n):
        label = rnd.randrange(5)
        choices = [f"Frase inventata {split} {k}.{j}: 'virgolette' e \"doppie\"." for j in range(4)] + [NONE]
        rows.append({"text": f"Paragrafo INVENTATO {split} {k}.\nSeconda riga {rnd.random():.6f}.",
                     "choices": choices, "label": label})
    return rows


def write_parquet(path: Path, rows: list[dict], with_id: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    cols = {"text": [r["text"] for r in rows], "choices": [r["choices"] for r in rows],
            "label": pa.array([r["label"] for r in rows], pa.int64())}
    if with_id:
        cols = {"id": pa.array([1000 + k for k in range(len(rows))], pa.int64()), **cols}
    pq.write_table(pa.table(cols), path)
    return path


@pytest.fixture
def hub(tmp_path) -> Path:
    """A folder in the hub's layout: data/test-00000-of-00001.parquet (12 rows), data/train-... (40 rows)."""
    root = tmp_path / "discotex-hub"
    write_parquet(root / "data" / "test-00000-of-00001.parquet", invented("test", 12, 1))
    write_parquet(root / "data" / "train-00000-of-00001.parquet", invented("train", 40, 2))
    return root


def task(folder, **kw):
    return make_task("discotex", TaskOptions(data=(("discotex", str(folder)),), **kw))


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


# -- the rows, in order, with their ids ---------------------------------------------------------------
def test_items_are_the_published_rows_in_order_with_derived_ids(hub):
    rows = invented("test", 12, 1)
    t = task(hub)
    items = t.items()
    assert [i.id for i in items] == [f"test-{k}" for k in range(12)]
    assert [list(i.choices) for i in items] == [r["choices"] for r in rows]
    assert [i.gold for i in items] == [r["label"] for r in rows]
    assert [i.fields["class"] for i in items] == [int(r["label"] != 4) for r in rows]
    assert {i.source for i in items} == {"published"}
    cfg = t.config()
    assert cfg["items"].startswith("published rows: the folder") and "id column" in cfg["ids"]
    assert cfg["shots"] == 0 and cfg["prompt_variant"] == "card"
    assert [f.path.name for f in t.data_files()] == ["test-00000-of-00001.parquet"]  # no pool with 0 shots


@pytest.mark.parametrize("layout", ["data/{s}-00000-of-00001.parquet", "{s}-00000-of-00001.parquet",
                                    "default/{s}/0000.parquet"])
def test_each_layout_and_the_id_column(tmp_path, layout):
    root = tmp_path / "r"
    write_parquet(root / layout.format(s="test"), invented("test", 5, 3), with_id=True)
    t = task(root)
    assert [i.id for i in t.items()] == [str(1000 + k) for k in range(5)]
    assert Path(t.data_ref([f.path for f in t.data_files()])) == (root / layout.format(s="test")).parent


def test_two_test_files_are_read_in_name_order(tmp_path):
    root = tmp_path / "r"
    a, b = invented("test", 3, 4), invented("test", 2, 5)
    write_parquet(root / "data" / "test-00001-of-00002.parquet", b)
    write_parquet(root / "data" / "test-00000-of-00002.parquet", a)
    items = task(root).items()
    assert [i.choices[0] for i in items] == [r["choices"][0] for r in a + b]
    assert [i.id for i in items] == [f"test-{k}" for k in range(5)]


@pytest.mark.parametrize("bad, message", [
    ({"label": 5}, "label must be 0-4"),
    ({"choices": ["a", "b", "c", "d"]}, "choices must be 5 strings"),
    ({"choices": ["a", "b", "c", "d", "e"]}, "the last choice must be"),
    ({"text": "un\0testo"}, "NUL byte"),
    ({"text": "  "}, "column text must be non-empty"),
])
def test_a_bad_row_is_refused_naming_the_file_and_row(tmp_path, bad, message):
    rows = invented("test", 4, 6)
    rows[2] = {**rows[2], **bad}
    path = write_parquet(tmp_path / "r" / "test-0.parquet", rows)
    with pytest.raises(DataError, match=message) as err:
        task(tmp_path / "r").items()
    assert str(path) in str(err.value) and "row 2" in str(err.value)


def test_a_paragraph_in_the_id_column_is_refused(tmp_path):
    rows = invented("test", 4, 7)
    path = tmp_path / "r" / "test-0.parquet"
    path.parent.mkdir()
    pq.write_table(pa.table({"id": [r["text"] for r in rows], "text": [r["text"] for r in rows],
                             "choices": [r["choices"] for r in rows], "label": [r["label"] for r in rows]}), path)
    with pytest.raises(DataError, match="not an id .*columns swapped"):
        task(tmp_path / "r").items()


# -- the wordings --------------------------------------------------------------------------------------
def reference_contexts(test_rows, train_rows, shots, template, description):
    """lm-eval's fewshot_context over the documents: the description, then for each document in
    order the shots its one random.Random(1234) draws from the train documents (pool is not the
    evaluated split: K drawn, a document equal to the evaluated one dropped), each rendered + " " +
    its gold letter + "\\n\\n", then the document's prompt."""
    rnd = random.Random(1234)
    out = []
    for doc in test_rows:
        chosen = [d for d in (rnd.sample(train_rows, shots) if shots else []) if d != doc][:shots]
        ctx = description + "".join(template(d) + " " + "ABCDE"[d["label"]] + "\n\n" for d in chosen)
        out.append(ctx + template(doc))
    return out


def test_ita_bench_contexts_byte_for_byte_as_lm_eval_renders_the_yaml(hub):
    test_rows, train_rows = invented("test", 12, 1), invented("train", 40, 2)
    template = unescape(ITA_TEMPLATE)
    for shots in (0, 2):
        want = reference_contexts(test_rows, train_rows, shots, lambda d: render_jinja(template, d),
                                  render_jinja(unescape(ITA_DESCRIPTION), {}))
        items = task(hub, prompt_variant="ita-bench", shots=shots).items()
        assert [i.context for i in items] == want
        # the cached prefix: the description, then every shot (all but the item's own prompt)
        own = render_jinja(template, test_rows[0])
        assert items[0].prefix == want[0][: len(want[0]) - len(own)]
        assert (shots or items[0].prefix == unescape(ITA_DESCRIPTION)) and items[0].continuations == (" A", " B", " C", " D", " E")


def test_the_card_wording_is_the_default(hub):
    test_rows, train_rows = invented("test", 12, 1), invented("train", 40, 2)

    def card(d):
        c = d["choices"]
        return unescape(CARD_PROMPT).format(text=d["text"], c0=c[0], c1=c[1], c2=c[2], c3=c[3], c4=c[4])

    want = reference_contexts(test_rows, train_rows, 3, card, unescape(CARD_DESCRIPTION) + "\n\n")
    assert [i.context for i in task(hub, shots=3).items()] == want


def test_an_unknown_wording_is_refused_by_the_run(hub):
    r = CliRunner().invoke(cli, ["run", "fake", "--backend", "fake", "--tasks", "discotex", "--data",
                                 f"discotex={hub}", "--prompt-variant", "calamita", "--out", "o"])
    assert r.exit_code == 2
    assert "--prompt-variant calamita is used by no task of this run (discotex's prompt variants are card, " \
           "ita-bench)" in r.output


# -- shots: drawn for every item in order, then selected -----------------------------------------------
def contexts(folder: Path) -> dict[str, str]:
    lines = (folder / "samples-discotex.jsonl").read_text().splitlines()
    return {s["id"]: s["context"] for s in map(json.loads, lines)}


def test_shots_do_not_depend_on_sample_shard_or_resume(tmp_path, hub, monkeypatch):
    from conftest import fail_after

    base = ["run", "fake", "--backend", "fake", "--tasks", "discotex", "--data", f"discotex={hub}", "--shots", 2,
            "--prompt-variant", "ita-bench", "--n-ctx", 8192]
    assert run(*base, "--out", tmp_path / "whole").exit_code == 0
    whole = contexts(tmp_path / "whole")
    assert len(whole) == 12 and len(set(whole.values())) == 12
    assert run(*base, "--sample", 5, "--out", tmp_path / "sample").exit_code == 0
    assert run(*base, "--shard", "2/3", "--out", tmp_path / "shard").exit_code == 0
    with monkeypatch.context() as m:
        fail_after(m, 4, KeyboardInterrupt)
        assert run(*base, "--out", tmp_path / "resumed").exit_code == 130
    assert run(*base, "--out", tmp_path / "resumed", "--resume").exit_code == 0
    for part in ("sample", "shard", "resumed"):
        got = contexts(tmp_path / part)
        assert got and all(whole[i] == c for i, c in got.items()), part
    assert len(contexts(tmp_path / "sample")) == 5 and len(contexts(tmp_path / "shard")) == 4
    doc = json.loads((tmp_path / "whole" / "results.json").read_text())
    cfg = doc["tasks"]["discotex"]["config"]
    assert cfg["shots"] == 2 and cfg["shot_seed"] == 1234 and cfg["shot_pool"] == "the published train split, 40 rows"
    assert cfg["prompt_variant"] == "ita-bench" and "ita-bench" in cfg["wording"]
    recorded = [Path(f["path"]).name for f in doc["tasks"]["discotex"]["data"]]
    assert recorded == ["test-00000-of-00001.parquet", "train-00000-of-00001.parquet"]
    samples = [json.loads(x) for x in (tmp_path / "whole" / "samples-discotex.jsonl").read_text().splitlines()]
    assert all(len(s["shot_ids"]) == 2 and all(x.startswith("train-") for x in s["shot_ids"]) for s in samples)


def test_shots_without_a_train_split_are_refused(tmp_path):
    write_parquet(tmp_path / "r" / "data" / "test-00000-of-00001.parquet", invented("test", 4, 8))
    with pytest.raises(DataError, match=r"shots=2 draws shots from the train split.*train-\*\.parquet"):
        task(tmp_path / "r", shots=2).items()


def test_a_check_of_a_published_rows_run_finds_its_files_again(tmp_path, hub):
    out = tmp_path / "o"
    assert run("run", "fake", "--backend", "fake", "--tasks", "discotex", "--data", f"discotex={hub}", "--shots", 1,
               "--n-ctx", 8192, "--out", out).exit_code == 0
    r = run("check", out)
    assert r.exit_code == 0, r.output


# -- the hub, with the network mocked --------------------------------------------------------------------
def test_no_data_given_takes_the_rows_from_the_hub(monkeypatch, hub):
    """hub.py's listing and download, mocked: the card's data/test-* files are fetched, the commit recorded."""
    from abricot_local.models import fetch

    commit = "0123456789abcdef0123456789abcdef01234567"
    snap = hub.parent / "hf" / "datasets--sapienzanlp--discotex" / "snapshots" / commit
    for f in (hub / "data").iterdir():
        (snap / "data").mkdir(parents=True, exist_ok=True)
        (snap / "data" / f.name).write_bytes(f.read_bytes())
    asked = []
    monkeypatch.setattr(fetch, "hub_dataset_files", lambda repo, revision=None, local_only=False: [
        ".gitattributes", "README.md", "data/test-00000-of-00001.parquet", "data/train-00000-of-00001.parquet"])

    def download(repo, name, revision=None, *, progress=True, local_only=False):
        asked.append((repo, name, local_only))
        return snap / name

    monkeypatch.setattr(fetch, "hub_dataset_download", download)
    t = make_task("discotex", TaskOptions(shots=1))
    assert len(t.items()) == 12 and t.warnings() == []
    assert asked == [("sapienzanlp/discotex", "data/test-00000-of-00001.parquet", False),
                     ("sapienzanlp/discotex", "data/train-00000-of-00001.parquet", False)]
    assert t.config()["items"] == f"published rows: hub sapienzanlp/discotex@{commit}"
    asked.clear()
    dry = make_task("discotex", TaskOptions(allow_download=False))
    dry.data_path()
    assert asked == [("sapienzanlp/discotex", "data/test-00000-of-00001.parquet", True)]  # the cache only


def test_the_hub_failing_online_falls_back_to_the_release_and_says_so(monkeypatch, discotex_dir):
    from abricot_local.models import fetch, hub_probe
    from abricot_local.errors import DownloadError

    monkeypatch.delenv("ABRICOT_OFFLINE")
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setattr(hub_probe, "unreachable", lambda timeout=3.0: None)  # no connection is made

    def refuse(*a, **k):
        raise DownloadError("dataset sapienzanlp/discotex cannot be listed: mocked")

    monkeypatch.setattr(fetch, "hub_dataset_files", refuse)
    t = make_task("discotex", TaskOptions(data_dir=str(discotex_dir)))
    assert t.config()["items"].startswith("rebuilt from the DisCoTEX release")  # data given: the hub is not asked
    t = make_task("discotex", TaskOptions())
    monkeypatch.setattr(type(t), "cache_folder", lambda self: discotex_dir)
    assert len(t.items()) == 1600
    assert t.config()["items"].startswith("rebuilt from the DisCoTEX release")
    assert any("could not be had" in w and "mocked" in w for w in t.warnings())


# -- rebuilt items: the TED-only pool -------------------------------------------------------------------
def test_rebuilt_items_draw_shots_from_the_ted_train_file_and_say_so(tmp_path, discotex_dir):
    t = make_task("discotex", TaskOptions(data_dir=str(discotex_dir), shots=2))
    items = t.items()
    assert len(items) == 1600 and all(len(i.fields["shot_ids"]) == 2 for i in items)
    from abricot_local.tasks.discotex import read_release_tsv

    train_ids = {r["ID"] for r in read_release_tsv(discotex_dir / "discotex_1_ted_train_set_release.tsv").rows}
    assert all(x in train_ids for i in items for x in i.fields["shot_ids"])
    cfg = t.config()
    assert cfg["shot_pool"].startswith("discotex_1_ted_train_set_release.tsv only (TED") and "8000 rows" in cfg["shot_pool"]
    assert [f.path.name for f in t.data_files()][-1] == "discotex_1_ted_train_set_release.tsv"
    lean = tmp_path / "lean"
    lean.mkdir()
    for name in ("discotex_1_ted_test_set_release.tsv", "discotex_1_wiki_test_set_release.tsv"):
        (lean / name).write_bytes((discotex_dir / name).read_bytes())
    with pytest.raises(DataError, match="draws shots from the TED train file, not in .*save https://raw"):
        make_task("discotex", TaskOptions(data_dir=str(lean), shots=2)).items()
    plain = make_task("discotex", TaskOptions(data_dir=str(lean))).items()  # 0 shots: no pool needed
    prefix = plain[0].prefix
    assert items[0].context.startswith(prefix) and items[0].context.endswith(plain[0].context[len(prefix):])
    assert items[0].context.count("\nRisposta:") == 3 and plain[0].context.count("\nRisposta:") == 1


# -- the hub for real, served on 127.0.0.1 ----------------------------------------------------------------
class FakeHub:
    """The few Hugging Face hub routes huggingface_hub asks for a dataset's file listing and its files,
    served on 127.0.0.1 from a dict of path -> bytes (every request is kept in ``asked``)."""

    COMMIT = "89abcdef0123456789abcdef0123456789abcdef"

    def __init__(self, repo: str, files: dict[str, bytes]):
        import hashlib
        import http.server
        import threading

        hub, self.asked = self, []
        tree = json.dumps([{"type": "file", "path": p, "size": len(b), "oid": hashlib.sha1(b).hexdigest()}
                           for p, b in files.items()]).encode()

        class Handler(http.server.BaseHTTPRequestHandler):
            def _answer(self, body: bool):
                path = self.path.split("?")[0]
                hub.asked.append(f"{self.command} {path}")
                resolve = f"/datasets/{repo}/resolve/"
                name = path[len(resolve):].partition("/")[2] if path.startswith(resolve) else None
                status = 200
                if path.startswith(f"/api/datasets/{repo}/tree/"):
                    data, headers = tree, {"Content-Type": "application/json"}
                elif name in files:
                    data = files[name]
                    headers = {"X-Repo-Commit": hub.COMMIT, "ETag": f'"{hashlib.sha256(data).hexdigest()}"',
                               "Content-Type": "application/octet-stream"}
                else:
                    status, data, headers = 404, b'{"error": "not found"}', {"X-Error-Code": "EntryNotFound"}
                self.send_response(status)
                for k, v in {**headers, "Content-Length": str(len(data))}.items():
                    self.send_header(k, v)
                self.end_headers()
                if body:
                    self.wfile.write(data)

            def do_GET(self):
                self._answer(True)

            def do_HEAD(self):
                self._answer(False)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.01,), daemon=True)  # poll_interval

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


# The real command in a fresh process, huggingface_hub pointed at a FakeHub (its class, as above) served on 127.0.0.1
# in a driver process's thread, started once the tests are collected (conftest.start_early) and at the latest as this
# module starts (hub_run), beside the other tests: the driver prints the command's outcome and what the hub was asked.
HUB_DRIVER = "import json, os, subprocess, sys\n" + inspect.getsource(FakeHub) + """
test, train = (open(p, "rb").read() for p in sys.argv[1:3])
files = {"README.md": b"---\\nconfigs: []\\n---\\n", "data/test-00000-of-00001.parquet": test,
         "data/train-00000-of-00001.parquet": train}
with FakeHub("sapienzanlp/discotex", files) as server:
    r = subprocess.run(sys.argv[3:], env={**os.environ, "HF_ENDPOINT": server.url}, capture_output=True, text=True,
                       timeout=300)
print(json.dumps({"returncode": r.returncode, "stdout": r.stdout, "stderr": r.stderr, "asked": server.asked}))
"""


def early_children(tmp_path_factory) -> dict:
    """HUB_DRIVER's process in its own folder (the hub's files written there first)."""
    import os
    import sys

    tmp_path = tmp_path_factory.mktemp("hub-run")
    hub = tmp_path / "discotex-hub"  # as the hub fixture makes it
    write_parquet(hub / "data" / "test-00000-of-00001.parquet", invented("test", 12, 1))
    write_parquet(hub / "data" / "train-00000-of-00001.parquet", invented("train", 40, 2))
    env = {k: v for k, v in os.environ.items()
           if k not in ("ABRICOT_OFFLINE", "HF_HUB_OFFLINE") and "proxy" not in k.lower()}
    env |= {"HF_HOME": str(tmp_path / "hf"), "NO_PROXY": "127.0.0.1",
            "ABRICOT_CACHE_DIR": str(tmp_path / "cache"), "ABRICOT_CONFIG_DIR": str(tmp_path / "config"),
            "HF_HUB_DISABLE_XET": "1"}
    cmd = [sys.executable, "-m", "abricot_local", "run", "fake", "--backend", "fake", "--tasks", "discotex",
           "--limit", "3", "--out", str(tmp_path / "o")]
    return {"hub": Early([sys.executable, "-c", HUB_DRIVER, str(hub / "data" / "test-00000-of-00001.parquet"),
                          str(hub / "data" / "train-00000-of-00001.parquet"), *cmd], env=env, cwd=tmp_path,
                         timeout=320)}


@pytest.fixture(scope="module", autouse=True)
def hub_run(tmp_path_factory):
    """HUB_DRIVER's process, started now if its turn has not come: the command runs beside the module's other
    tests."""
    from conftest import early_children_of

    (child,) = early_children_of(__name__, early_children, tmp_path_factory).values()
    tmp_path = Path(child.popen["cwd"])
    child.start()
    try:
        yield {"child": child, "test": tmp_path / "discotex-hub" / "data" / "test-00000-of-00001.parquet",
               "out": tmp_path / "o", "tmp_path": tmp_path}
    finally:
        child.close()


def test_the_rows_come_from_a_hub_through_huggingface_hub(hub_run):
    """The real command in a fresh process, huggingface_hub pointed at a hub served on 127.0.0.1:
    the listing, the card's data/test-* file, the commit and the file's SHA-256 recorded."""
    from abricot_local.models import fetch

    driver, test, out = hub_run["child"].result(), hub_run["test"], hub_run["out"]
    assert driver.returncode == 0, driver.stderr
    got = json.loads(driver.stdout)
    r, asked = subprocess.CompletedProcess([], got["returncode"], got["stdout"], got["stderr"]), got["asked"]
    assert r.returncode == 0, r.stdout + r.stderr + "\n".join(asked)
    assert "GET /datasets/sapienzanlp/discotex/resolve/main/data/test-00000-of-00001.parquet" in asked
    assert not any("train-" in a for a in asked)  # 0 shots: the pool is not fetched
    doc = json.loads((out / "results.json").read_text())
    entry = doc["tasks"]["discotex"]
    assert entry["config"]["items"] == f"published rows: hub sapienzanlp/discotex@{FakeHub.COMMIT}"
    assert [d["sha256"] for d in entry["data"]] == [fetch.sha256_file(test)]
    assert Path(entry["data"][0]["path"]).is_relative_to(hub_run["tmp_path"] / "hf")
    assert [json.loads(x)["id"] for x in (out / "samples-discotex.jsonl").read_text().splitlines()] == \
        ["test-0", "test-1", "test-2"]


def test_the_ted_pool_is_fetched_into_the_cache_beside_the_release(monkeypatch, discotex_dir):
    """Rebuilt from the cached release with --shots: the TED train file comes from its pinned URL
    (mocked download), SHA-256 checked, into the same cache folder."""
    import shutil

    from abricot_local.models import fetch
    from abricot_local.tasks import discotex

    cache = fetch.cache_dir() / "data" / "discotex"
    cache.mkdir(parents=True)
    for name, _, _ in discotex.RELEASE.values():
        shutil.copyfile(discotex_dir / name, cache / name)
    asked = []

    def download(url, dest, *, sha256=None, progress=True):
        asked.append((url, sha256))
        shutil.copyfile(discotex_dir / dest.name, dest)
        return dest

    monkeypatch.setattr(fetch, "download_url", download)
    t = make_task("discotex", TaskOptions(shots=1))
    assert len(t.items()) == 1600 and (cache / discotex.TRAIN[0]).is_file()
    assert asked == [(discotex.RELEASE_URL.format(commit=discotex.RELEASE_COMMIT, folder="train",
                                                  name=discotex.TRAIN[0]), discotex.TRAIN[2])]


def test_the_lazy_pool_is_the_built_pool_row_for_row(discotex_dir):
    """The few-shot pool's rows are built only when drawn (8000 TED train rows): each the same Row
    build_rows gives (a row's draws depend on its index alone)."""
    from abricot_local.tasks.discotex_release import LazyRows, build_rows, read_release_tsv

    rows = read_release_tsv(discotex_dir / "discotex_1_ted_test_set_release.tsv").rows
    built, lazy = build_rows(2, "ted_train", rows, 7), LazyRows(2, "ted_train", rows, 7)
    assert len(lazy) == len(built) and [lazy[k] for k in (799, 0, 400, -1)] == [built[k] for k in (799, 0, 400, -1)]
    assert lazy[:] == built
