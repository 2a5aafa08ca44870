"""The llama_server fixture: a real local model behind the OpenAI API, used by the raw SDK."""

from __future__ import annotations

import json
from typing import Any

import openai

SCHEMA: dict[str, Any] = {"type": "object", "properties": {"city": {"type": "string"}},
                          "required": ["city"]}
# llama-cpp-python's extension of OpenAI's json_object mode: decoding constrained to a schema.
RESPONSE_FORMAT: Any = {"type": "json_object", "schema": SCHEMA}


def test_json_schema_completion_from_the_local_model(llama_server: str) -> None:
    with openai.OpenAI(base_url=llama_server, api_key="x", max_retries=0, timeout=120) as client:
        assert [model.id for model in client.models.list()] == ["smollm2"]
        result = client.chat.completions.create(
            model="smollm2", max_tokens=40, temperature=0, seed=1,
            messages=[{"role": "system", "content": "Answer in JSON."},
                      {"role": "user", "content": "Name one city in France."}],
            response_format=RESPONSE_FORMAT,
        )
    content = result.choices[0].message.content
    assert content is not None
    assert "city" in json.loads(content)
    assert result.usage is not None and result.usage.prompt_tokens > 0
