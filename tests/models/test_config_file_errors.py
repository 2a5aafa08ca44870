"""A ``counterpoint.toml`` that is wrong in any way is one ``ConfigError`` naming the
file, the line and what to do: never a traceback, a silently ignored key, or an error
found only when the first call fails."""

from __future__ import annotations

from pathlib import Path

import pytest

from counterpoint.errors import ConfigError
from counterpoint.models import load_registry

M = '[models.m]\nprovider = "openai"\nmodel = "x"\n'

# (content, the message after "PATH:")
BAD: list[tuple[str, bytes, str]] = [
    ("models-scalar", b"models = 3\n", "1: models must be a table ([models.NAME]), not 3"),
    ("defaults-scalar", b'defaults = "x"\n',
     "1: defaults must be a table ([defaults]), not 'x'"),
    ("defaults-typo", b'[defaults]\nmodel = "m"\nmdoel = 1\n',
     "3: unknown key 'mdoel' in [defaults]; it holds model and cache"),
    ("not-utf8", b"\xff\xfe[models.m]\n", "1: the file is not UTF-8 text"),
    ("key-typo", (M + 'modle = "y"\n').encode(),
     "4: model 'm': unknown key 'modle'; did you mean 'model'?"),
    ("no-scheme", (M + 'base_url = "127.0.0.1:8000/v1"\n').encode(),
     "1: model 'm' is invalid: base_url '127.0.0.1:8000/v1' is not an http:// or https:// "
     "URL; write it like http://127.0.0.1:8000/v1"),
    ("no-replicas", (M + "base_urls = []\n").encode(),
     "1: model 'm' is invalid: base_urls is empty"),
    ("both-urls", (M + 'base_url = "http://a/v1"\nbase_urls = ["http://b/v1"]\n').encode(),
     "1: model 'm' is invalid: set base_url (one endpoint) or base_urls (replicas), not "
     "both"),
    ("own-fallback", (M + 'fallbacks = ["m"]\n').encode(),
     "1: model 'm' lists itself in fallbacks; name another model there"),
]


@pytest.mark.parametrize(("content", "message"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_a_wrong_config_file_is_a_config_error_with_its_line(tmp_path: Path, content: bytes,
                                                             message: str) -> None:
    path = tmp_path / "counterpoint.toml"
    path.write_bytes(content)
    with pytest.raises(ConfigError) as caught:
        load_registry([path])
    assert str(caught.value).startswith(f"{path}:{message}"), str(caught.value)


def test_a_right_one_still_loads(tmp_path: Path) -> None:
    path = tmp_path / "counterpoint.toml"
    path.write_text('[defaults]\nmodel = "m"\ncache = false\n\n' + M
                    + 'base_urls = ["http://a:1/v1", "https://b/v1"]\n'
                    'fallbacks = ["local:smollm2"]\n')
    registry = load_registry([path])
    assert registry.resolve().base_urls == ("http://a:1/v1", "https://b/v1")
    assert registry.cache is False
