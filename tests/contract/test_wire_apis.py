"""The wire-API table: it names the APIs `--api` takes, and what is derived from it keeps each path once."""

from __future__ import annotations

from typing import get_args

from looplab.adapters.contract.model import Api
from looplab.adapters.contract.wire_apis import (
    API_OF_ENDPOINT,
    ENDPOINT_OF_SUFFIX,
    GEMINI,
    MODEL_PATHS,
    WIRE_API,
    WIRE_APIS,
)


def test_the_table_names_the_apis_the_api_option_takes_in_its_order() -> None:
    assert tuple(api.name for api in WIRE_APIS) == get_args(Api)
    assert list(WIRE_API) == list(get_args(Api))


def test_every_api_has_a_path_or_methods_and_not_both() -> None:
    assert all(bool(api.path) != bool(api.methods) for api in WIRE_APIS)


def test_gemini_streams_on_its_stream_method_only() -> None:
    assert GEMINI.methods == {"generateContent": False, "streamGenerateContent": True}
    assert GEMINI.suffixes == (":generateContent", ":streamGenerateContent")


def test_every_path_suffix_is_a_model_path_and_names_a_recorded_endpoint_of_an_api() -> None:
    assert MODEL_PATHS == tuple(ENDPOINT_OF_SUFFIX)
    assert set(ENDPOINT_OF_SUFFIX.values()) == set(API_OF_ENDPOINT)
    assert WIRE_API["chat"].suffixes == ("/chat/completions",)
