"""One call opens a model (issue 28, item 4): models.locate.open_model resolves the name, applies the
registry entry's n_ctx unless n_ctx was given, and builds the backend's own options once; the plan,
lm-eval and the label map all go through it."""

from __future__ import annotations

import pytest

from abricot_local.backends.options import ScoringOptions
from abricot_local.errors import UsageError
import planned
from abricot_local.run import look
from abricot_local.models.given import Given
from abricot_local.models.locate import open_model
from abricot_local.tasks.base import TaskOptions
from conftest import FIXTURE

TOML = '["tiny"]\nsource = "synthetic"\nbackend = "fake"\nn_ctx = 4096\n'


@pytest.fixture
def models(tmp_path):
    path = tmp_path / "models.toml"
    path.write_text(TOML, encoding="utf-8")
    return str(path)


def test_the_registry_n_ctx_applies_unless_given(models):
    opened = open_model("tiny", Given("fake"), models_file=models)
    assert opened.ref.backend == "fake" and opened.options.n_ctx == 4096
    assert isinstance(opened.options, ScoringOptions)
    assert open_model("tiny", Given("fake", {"n_ctx": "1024"}), models_file=models).options.n_ctx == 1024
    backend = opened.load()
    try:
        assert backend.options.n_ctx == 4096
    finally:
        backend.close()


def test_a_given_value_is_parsed_and_checked_by_its_field():
    assert Given("fake", {"n_batch": "64"}).checked().n_batch == 64
    with pytest.raises(UsageError, match="n_batch must be at least 1, got 0"):
        Given("fake", {"n_batch": 0}).checked()
    with pytest.raises(UsageError, match="the fake backend has no option n_gpu_layers"):
        Given("fake", {"n_gpu_layers": 3}).checked()  # an option the fake backend lacks


def test_given_of_options_keeps_every_field_but_those_left_to_the_registry():
    opts = ScoringOptions(n_ctx=512, n_batch=32)
    assert Given.of(opts).backend == "fake" and Given.of(opts).values["n_ctx"] == 512
    assert "n_ctx" not in Given.of(opts, but=("n_ctx",)).values


def test_the_plan_and_the_label_map_open_the_model_as_run_does(models):
    topts = TaskOptions(data=(("abricot", str(FIXTURE)),))
    plan = planned.plan_run(model="tiny", given=Given("fake"), task_spec="abricot_abs", task_options=topts,
                             limit=2, models_file=models)
    assert plan.backend_options.n_ctx == 4096 and plan.config().extra["n_ctx"] == 4096
    given = planned.plan_run(model="tiny", given=Given("fake", {"n_ctx": 2048}), task_spec="abricot_abs",
                              task_options=topts, limit=2, models_file=models)
    assert given.backend_options.n_ctx == 2048
    info = look.label_map("tiny", Given("fake"), "abricot_abs", topts, models)
    assert info["choices"] and all(row["ids"] for row in info["choices"])
