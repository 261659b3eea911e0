"""Backends and stores register through entry points, as tasks do, lazily (issue 28, item 5): a
package names a small module (a backends.Registered; a store module); the backend's runtime and
the store's module load only when used."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def dist(tmp_path, entry_points: str, **modules: str):
    """A distribution on sys.path (tmp_path): its entry points and modules."""
    info = tmp_path / "toyplugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toyplugin\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(textwrap.dedent(entry_points), encoding="utf-8")
    for name, code in modules.items():
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(code), encoding="utf-8")


REGISTER = """
    from abricot_local.backends import Registered
    REGISTERED = Registered("toy_backend:ToyBackend", "abricot_local.backends.options:ScoringOptions")
"""
BACKEND = """
    from abricot_local.backends.fake import FakeBackend
    class ToyBackend(FakeBackend):
        name = "toy"
"""
STORE = """
    def resolve(name, **kw):
        raise NotImplementedError
    def listing(model_dirs=()):
        return []
"""


PLUGIN_LOADS = ("import sys\n"
                "from abricot_local.backends import BACKENDS, backend_class\n"
                "from abricot_local.models import stores\n"
                "print('toy' in BACKENDS, 'toy_backend' in sys.modules, stores.prefix_of('toystore:x'),"
                " 'toy_store' in sys.modules)\n"
                "print(backend_class('toy').name, stores._module('toystore').listing())")


def early_children(tmp_path_factory) -> dict:
    """The toy plugin's distribution on PYTHONPATH and PLUGIN_LOADS in a fresh process, started by conftest once the
    tests are collected, beside the other tests (conftest.start_early)."""
    from conftest import Early

    tmp_path = tmp_path_factory.mktemp("plugin")
    dist(tmp_path, "[abricot_local.backends]\ntoy = toy_register:REGISTERED\n"
                   "[abricot_local.model_stores]\ntoystore = toy_store\n",
         toy_register=REGISTER, toy_backend=BACKEND, toy_store=STORE)
    return {"loads": Early([sys.executable, "-c", PLUGIN_LOADS], timeout=120, cwd=tmp_path,
                           env={**os.environ, "PYTHONPATH": os.pathsep.join((str(tmp_path), str(ROOT)))})}


@pytest.fixture(scope="module")
def plugin_loads(tmp_path_factory):
    from conftest import early_children_of

    (child,) = early_children_of(__name__, early_children, tmp_path_factory).values()
    yield child
    child.close()


def test_a_backend_plugin_is_registered_and_loads_when_used(plugin_loads):
    r = plugin_loads.result()
    assert r.stdout.splitlines() == ["True False toystore False", "toy []"], r.stdout + r.stderr
