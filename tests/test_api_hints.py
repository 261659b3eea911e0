"""Errors raised from the Python API name its keywords, not `run`'s flags (issue 39 item 6): one
mechanism (api/options.keyword_hints) over every call, the error's class unchanged for `except`."""

from __future__ import annotations

import pytest

import abricot_local as al
from abricot_local.api.options import as_keywords
from abricot_local.errors import MissingDataError, UsageError


def test_flags_become_keywords():
    assert as_keywords("offline: --data-dir DIR (the release)") == "offline: data_dir=DIR (the release)"
    assert as_keywords("--data abricot=FILE, or --force") == 'data={"abricot": FILE}, or force=True'
    assert as_keywords("--limit must be at least 1") == "limit must be at least 1"
    assert as_keywords("raise --n-ctx 4096") == "raise n_ctx=4096"
    assert as_keywords("--shard K/N of --models FILE") == "shard=K/N of models_file=FILE"
    # not the API's: left as written (a command, another command's flag)
    assert as_keywords("`abricot-local data pull --tests`; --format json") == \
        "`abricot-local data pull --tests`; --format json"


def test_an_api_error_names_keywords_and_keeps_its_class():
    with pytest.raises(UsageError) as err:
        al.evaluate("fake", "discotex", backend="fake", sample=0, progress=False)
    assert "sample must be at least 1" in str(err.value) and "--" not in str(err.value)
    assert type(err.value).__name__ == "UsageError"


def test_missing_data_says_the_keyword_offline():
    with pytest.raises(MissingDataError) as err:  # offline (conftest), an empty cache
        al.evaluate("fake", "discotex", backend="fake", progress=False)
    text = str(err.value)
    assert "offline: data_dir=DIR" in text and "--data-dir" not in text
    assert "abricot-local data pull discotex" in text  # a shell command stays one
