"""Errors raised from the Python API name its keywords, not `run`'s flags (issue 39 item 6; issue 44
item 1): a message names an option by its field (errors.opt) and each door writes it: Python's keyword
(``str(err)``), the command line's flag, lm-eval's model_args; no message is rewritten, the error's class
is its own."""

from __future__ import annotations

import pytest

import abricot_local as al
from abricot_local.cli.options import flags
from abricot_local.errors import MissingDataError, UsageError, keywords, opt, render
from abricot_local.lm_eval.requests import model_arg


def test_each_door_writes_an_option_its_own_way():
    text = f"offline: {opt('data_dir', 'DIR')} (the release); {opt('data', ('abricot', 'FILE'))}, or {opt('force', True)}"
    assert render(text, keywords) == 'offline: data_dir=DIR (the release); data={"abricot": FILE}, or force=True'
    assert render(text, flags) == "offline: --data-dir DIR (the release); --data abricot=FILE, or --force"
    import click

    from abricot_local.cli import cli

    with click.Context(cli):  # a flag whose dest is another name: the program's own
        assert render(f"{opt('n_ctx', 4096)} {opt('models_file', 'FILE')} {opt('model_dirs')}", flags) == \
            "--n-ctx 4096 --models FILE --model-dir"
    assert render(f"raise {opt('n_ctx', 4096)}", model_arg) == "raise model_args n_ctx=4096"
    assert render("`abricot-local data pull --tests`; --format json") == "`abricot-local data pull --tests`; --format json"


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
