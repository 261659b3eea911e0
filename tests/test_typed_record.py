"""A run's record sections made in code from typed values (issue 44): the plan's config and manifest
(run.plan.Plan), the model's section (models.ref.ModelRef.record), the provenance (run.record.provenance),
each a record/ section that writes the keys results.json has always held, in its order, and reads back equal."""

from __future__ import annotations

import json
from dataclasses import replace

from abricot_local.backends.fake import FakeBackend
from abricot_local.backends.options import ScoringOptions
from abricot_local.metrics import CI_LEVEL, N_BOOT
from abricot_local.models.given import Given
from abricot_local.models.ref import ModelRef
from abricot_local.record import Bootstrap, ChatWrap, DataFile, Manifest, Model, Provenance, RunConfig
from abricot_local.run.plan import make_plan
from abricot_local.run.record import provenance
from abricot_local.run.request import RunRequest, SettleOptions, Shard
from abricot_local.tasks.base import TaskOptions
from conftest import FIXTURE


def _plan(**kw):
    request = RunRequest(("fake",), Given("fake", {"n_ctx": 4096}), "abricot_abs",
                         TaskOptions(data=(("abricot", str(FIXTURE)),), seed=7), **kw)
    return make_plan(request)


def _back(section):
    """``section`` as a run folder holds it, read again."""
    return type(section).from_dict(json.loads(json.dumps(section.to_dict())))


def test_the_plan_s_sections_are_typed_and_read_back_equal():
    p = _plan(limit=6, shard=Shard(1, 2), settle=SettleOptions(until_settled=True, looks=(10, 5)))
    files = p.data["abricot_abs"]
    assert files and all(isinstance(f, DataFile) and f.path == str(FIXTURE) for f in files)
    config, compared, manifest = p.config(), p.compared(), p.manifest()
    assert isinstance(config, RunConfig) and isinstance(manifest, Manifest) and manifest.config == compared
    assert (config.tasks, config.limit, config.shard, config.seed, config.looks) == (("abricot_abs",), 6, "1/2", 7, (5, 10))
    assert compared.until_settled is None and compared.looks is None  # --until-settled's: recorded, not compared
    assert manifest.data_sha256 == {"abricot_abs": tuple(f.sha256 for f in files)}
    assert _back(manifest) == manifest and _back(config) == config
    keys = list(config.to_dict())  # the run's own keys, the options' (tasks', backend's), then --until-settled's
    assert keys[:6] == ["model", "backend", "tasks", "limit", "sample", "shard"] and keys[6] == "seed"
    assert keys.index("n_ctx") < keys.index("until_settled") and keys[-2:] == ["until_settled", "looks"]
    assert list(manifest.to_dict()) == ["config", "model_sha256", "data_sha256", "task_versions"]
    assert list(p.model_config().to_dict())[:2] == ["model", "backend"] and "tasks" not in p.model_config().to_dict()


def test_a_model_s_section_is_made_typed_and_says_when_it_is_synthetic(tmp_path):
    fake = ModelRef("fake", "synthetic", "fake", "fake")
    assert fake.synthetic and not replace(fake, source="path").synthetic
    rec = fake.record()
    assert isinstance(rec, Model) and _back(rec) == rec
    assert list(rec.to_dict()) == ["name", "alias", "path", "size", "sha256", "source", "as_written"]
    facts = ModelRef("x", "hf", "fake", "x", revision="abc", sha256_origin="memo", source_facts=(("k", "v"),)).record()
    assert (facts.revision, facts.sha256_origin, facts.source_facts) == ("abc", "memo", {"k": "v"})
    assert _plan().unheld == ""  # no registry entry: nothing it is held to


def test_the_provenance_is_the_backend_s_typed_with_the_run_s_sections_in_the_file_s_order():
    backend = FakeBackend("fake", ScoringOptions())
    own = backend.provenance()
    made = provenance(backend, bootstrap=Bootstrap(n_boot=N_BOOT, level=CI_LEVEL, seed=3), chat_template=None)
    assert isinstance(made, Provenance) and made.bootstrap.seed == 3 and made.abricot_local
    keys = list(made.to_dict())
    assert keys == ["abricot_local", "python", *own.to_dict(), "bootstrap", "chat_template"]
    assert made.to_dict()["chat_template"] is None
    counted = replace(made, kernels=made.kernels.placed(last=("thread_dependent",), thread_dependent=5))
    assert list(counted.to_dict()["kernels"])[-1] == "thread_dependent" and _back(counted) == counted
    wrapped = provenance(backend, chat_template=ChatWrap(head="<u>", tail="</u>"))
    assert wrapped.to_dict()["chat_template"] == {"head": "<u>", "tail": "</u>"} and "bootstrap" not in wrapped.to_dict()


def test_a_door_s_own_keys_go_before_and_after_the_backend_s():
    backend = FakeBackend("fake", ScoringOptions())
    made = provenance(backend, before={"model": {"name": "fake"}}, after={"requests": {"rule": 1}})
    keys = list(made.to_dict())
    assert keys[:3] == ["abricot_local", "python", "model"] and keys[-1] == "requests"
    assert made.extra["model"] == {"name": "fake"} and _back(made) == made
