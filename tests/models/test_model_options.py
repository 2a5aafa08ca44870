"""``cp.Model(...)``'s own options are checked when the model is made, with a message
naming the option and what to write; before, each was taken as given and failed, or
meant something else, at the first call (``timeout=nan``, ``retries=True``)."""

from __future__ import annotations

from typing import Any

import pytest

import counterpoint as cp
from counterpoint.models import ScriptedModel

NAN = float("nan")


@pytest.mark.parametrize(("options", "says"), [
    ({"retries": -1}, r"Model\(retries=\.\.\.\) must be >= 0, got -1; leave it unset"),
    ({"retries": True}, r"Model\(retries=\.\.\.\) must be a whole number >= 0, got True"),
    ({"output_retries": -1}, r"Model\(output_retries=\.\.\.\) must be >= 0, got -1"),
    ({"timeout": NAN}, r"Model\(timeout=\.\.\.\) must be > 0 seconds \(a number\), got nan"),
    ({"timeout": -1}, r"Model\(timeout=\.\.\.\) must be > 0 seconds"),
    ({"max_concurrency": 0}, r"Model\(max_concurrency=\.\.\.\) must be >= 1, got 0; leave "
                             r"it unset for no limit"),
    ({"rpm": NAN}, r"Model\(rpm=\.\.\.\) must be a finite number > 0, got nan"),
    ({"tpm": -5}, r"Model\(tpm=\.\.\.\) must be a finite number > 0, got -5"),
    ({"cache": "yes"}, r"Model\(cache=\.\.\.\) must be True, False or None"),
    ({"backoff": {"initial": 1}}, r"Model\(backoff=\.\.\.\) must be a cp.Backoff"),
])
def test_an_option_no_call_could_use_is_refused_when_the_model_is_made(
        options: dict[str, Any], says: str) -> None:
    with pytest.raises(cp.UserError, match=says):
        cp.Model(ScriptedModel(["hi"]), **options)


async def test_options_at_the_edges_of_their_ranges_are_taken() -> None:
    model = cp.Model(ScriptedModel(["hi"]), retries=0, output_retries=0, timeout=5,
                     max_concurrency=1, rpm=60, tpm=0.5, cache=None)
    assert (await model.generate("Say hi.")).text == "hi"
