"""A model's numbers in counterpoint.toml (rates, timeout, prices, counts) are checked
as every option's are (counterpoint.checks): ``true``, ``nan``, ``inf`` or a value out
of range is one ConfigError naming the file, the model and the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from counterpoint.errors import ConfigError
from counterpoint.models import load_registry

HEAD = '[models.m]\nprovider = "openai"\nmodel = "gpt-4.1-mini"\n'


@pytest.mark.parametrize(("line", "said"), [
    ("rpm = inf", "rpm: must be a finite number > 0, got inf; leave it out for no limit"),
    ("rpm = true", "rpm: must be a finite number > 0, got True; leave it out for no limit"),
    ("rpm = 0", "rpm: must be a finite number > 0, got 0; leave it out for no limit"),
    ("tpm = nan", "tpm: must be a finite number > 0, got nan; leave it out for no limit"),
    ("tpm = -5", "tpm: must be a finite number > 0, got -5; leave it out for no limit"),
    ('rpm = "600"', "rpm: must be a finite number > 0, got '600'; leave it out for no limit"),
    ("timeout = inf", "timeout: must be > 0 seconds (a number), got inf"),
    ("timeout = 0", "timeout: must be > 0 seconds (a number), got 0"),
    ("max_concurrency = true", "max_concurrency: must be a whole number >= 1, got True (bool); "
                               "leave it out for no limit"),
    ("max_concurrency = 0", "max_concurrency: must be >= 1, got 0; leave it out for no limit"),
    ("retries = -1", "retries: must be >= 0, got -1"),
    ("retries = true", "retries: must be a whole number >= 0, got True (bool)"),
    ("price_input = inf", "price_input: must be a finite number >= 0, got inf"),
    ("price_output = -1", "price_output: must be a finite number >= 0, got -1"),
    ("context_window = 1.5", "context_window: must be a whole number >= 1, got 1.5 (float)"),
])
def test_a_bad_number_names_the_key_and_its_line(tmp_path: Path, line: str, said: str) -> None:
    path = tmp_path / "counterpoint.toml"
    path.write_text(HEAD + line + "\n")
    with pytest.raises(ConfigError) as caught:
        load_registry([path])
    assert str(caught.value) == f"{path}:4: model 'm' is invalid: {said}"


def test_several_bad_numbers_are_named_at_the_first_ones_line(tmp_path: Path) -> None:
    path = tmp_path / "counterpoint.toml"
    path.write_text(HEAD + "rpm = nan\nmax_concurrency = 0\n")
    with pytest.raises(ConfigError) as caught:
        load_registry([path])
    assert str(caught.value) == (
        f"{path}:5: model 'm' is invalid: max_concurrency: must be >= 1, got 0; leave it out "
        "for no limit; rpm: must be a finite number > 0, got nan; leave it out for no limit")


def test_good_numbers_load(tmp_path: Path) -> None:
    path = tmp_path / "counterpoint.toml"
    path.write_text(HEAD + "rpm = 600\ntpm = 1e6\ntimeout = 30\nretries = 0\n"
                    "max_concurrency = 4\nprice_input = 0\n")
    config = load_registry([path]).resolve("m")
    assert (config.rpm, config.timeout, config.retries) == (600.0, 30.0, 0)
