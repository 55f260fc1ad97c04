"""How the model boundary reads a reply's bytes."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from looplab.adapters.boundary.wire_reply import read_json

SURROGATES = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
TEXT = st.text() | st.text(SURROGATES | st.characters(), max_size=8)
NUMBERS = st.integers() | st.integers(min_value=-(10**60), max_value=10**60) | st.floats()
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | NUMBERS | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=12,
)


def _rendered(value: Any, ascii_only: bool) -> bytes:
    return json.dumps(value, ensure_ascii=ascii_only).encode("utf-8", errors="surrogatepass")


def _object_with_repeated_keys(pairs: list[tuple[str, Any]]) -> bytes:
    return ("{" + ", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in pairs) + "}").encode()


def _standard(body: bytes) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        return None


@given(
    body=st.one_of(
        st.builds(_rendered, JSON_VALUES, st.booleans()),
        st.builds(_object_with_repeated_keys, st.lists(st.tuples(st.sampled_from("abc"), JSON_VALUES), max_size=6)),
        st.builds(lambda d: b"[" * d + b"]" * d, st.integers(0, 400)),
        st.builds(lambda head, b: head + b, st.sampled_from([b"\xef\xbb\xbf", b" \n", b"\t"]), st.just(b'{"a": [1]}')),
        st.binary(max_size=40),
        st.text(max_size=40).map(str.encode),
    )
)
def test_a_reply_body_is_read_as_the_standard_json_module_reads_it(body: bytes) -> None:
    """The faster parser first, `json` where it refuses: the same value (NaN, -0.0 and key order included) or None."""
    assert repr(read_json(body)) == repr(_standard(body))
