"""An --until-settled rule and its record, typed both ways (analysis.settled.record_of, restored): a
sequential.Sequential becomes the record.Settle results.json holds, field by field, and comes back as it was; what
the file reads back is the record made (no dict between them)."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np

from abricot_local.analysis import sequential as sq
from abricot_local.analysis.settled import record_of, restored
from abricot_local.record import Settle, SettleLook, SettleQuestion
from abricot_local.record.codec import typed_fields


def _state() -> sq.Sequential:
    """A published row (accuracy) and a rung's correlation, three looks over 120 items (the last exact)."""
    rng = np.random.default_rng(5)
    total = 120
    x, gold = (rng.random(total) < 0.7).astype(int), np.ones(total, int)
    a, b = rng.random(total), rng.random(total)
    qs = [sq.Question("SRC: M t.accuracy", "accuracy", 0.2, published=0.6, rounding=0.005),
          sq.Question("M vs R t.pearson", "pearson", 0.3)]
    s = sq.start(total, qs, looks=(20, 60))
    for n in s.planned:
        s = sq.look(s, n, {qs[0].name: [x[:n], gold[:n]], qs[1].name: [a[:n], b[:n], a[:n], b[:n] + 0.01]})
        if s.stopped:
            break
    return s


def test_a_rule_becomes_its_record_and_comes_back_as_it_was():
    s = _state()
    rec = record_of(s, "../ref")
    assert isinstance(rec, Settle) and all(isinstance(q, SettleQuestion) for q in rec.questions)
    assert rec.looks and all(isinstance(lk, SettleLook) for lk in rec.looks)
    assert (rec.method, rec.n, rec.reference) == (s.method, s.n, "../ref")
    assert restored(rec) == s
    text = json.dumps(rec.to_dict(), allow_nan=False)  # what results.json holds: plain JSON
    assert Settle.from_dict(json.loads(text), "sequential") == rec  # read back: the record made
    assert list(json.loads(text)) == [f.name for f, _ in typed_fields(Settle)]  # the schema's order
    assert "reference" not in record_of(s).to_dict()  # a row's rule: no reference written


def test_an_undefined_value_is_recorded_as_null():
    s = _state()
    lk = dataclasses.replace(s.looks[0], value=math.nan)
    rec = record_of(dataclasses.replace(s, looks=(lk, *s.looks[1:])))
    assert rec.looks[0].value is None and restored(rec).looks[0].value is None
    json.dumps(rec.to_dict(), allow_nan=False)


def test_the_analysis_types_name_the_record_s_fields():
    """Each rule's field is the record's of the same name (record_of and restored copy them by name): one added to
    either side without the other fails here."""
    def names(cls):
        return {f.name for f in dataclasses.fields(cls)}

    assert names(sq.Look) == {f.name for f, _ in typed_fields(SettleLook)}
    assert names(sq.Question) == {f.name for f, _ in typed_fields(SettleQuestion)}
    assert names(sq.Sequential) | {"method", "n", "reference"} == {f.name for f, _ in typed_fields(Settle)}
