"""`check` of a `--until-settled` run (run/check_settled.py): a look that, taken again, reads otherwise fails the
check for a record of today's verdict method, and is a note, not a failure, for one an earlier method read
(published.method below reproduction.METHOD), as published verdicts of earlier methods are held."""

from __future__ import annotations

import json

from click.testing import CliRunner

from abricot_local.analysis.reproduction import METHOD
from abricot_local.cli import cli


def test_a_look_read_otherwise_fails_today_and_is_a_note_for_an_earlier_method(tmp_path, claims, abricot_file):
    out = tmp_path / "o"
    r = CliRunner().invoke(cli, [str(a) for a in (
        "run", "fake-as-llama", "--models", claims, "--tasks", "abricot_abs", "--data", f"abricot={abricot_file}",
        "--backend", "fake", "--n-ctx", "4096", "--until-settled", "--looks", "20", "--max-items", 20,
        "--out", out)])
    assert r.exit_code == 0, r.output
    path = out / "results.json"
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert doc["published"]["method"] == METHOD
    (look,) = doc["tasks"]["abricot_abs"]["sequential"]["looks"][:1]
    look["value"] += 0.5  # a look's figure another method (or a hand) gave
    for method, held in ((METHOD, False), (METHOD - 1, True)):
        doc["published"]["method"] = method
        path.write_text(json.dumps(doc), encoding="utf-8")
        r = CliRunner().invoke(cli, ["check", str(out)])
        assert (r.exit_code == 0) == held, (method, r.output)
        assert "value recorded" in r.output, r.output
        if held:
            assert f"read by verdict method {METHOD - 1}, today's is {METHOD}" in r.output, r.output
