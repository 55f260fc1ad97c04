"""Reading a knob's default from the installed library (`looplab.adapters.contract.runner.signature_default`).

Apart from tests/measure/test_caps.py, which also runs in the runner environments, where hypothesis is not installed.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from looplab.adapters.contract.runner import signature_default


class _Omitted:
    """A sentinel default, as SDKs use for "not given"."""


@given(default=st.one_of(st.integers(), st.none(), st.booleans(), st.builds(_Omitted), st.text(max_size=5)))
def test_a_signature_default_is_an_int_or_unset_and_its_source_names_where_it_was_read(default: object) -> None:
    def knob(max_calls=default) -> None: ...  # type: ignore[no-untyped-def]

    read = signature_default(knob, "max_calls")
    if isinstance(default, int) and not isinstance(default, bool):
        assert read.value == default
    else:
        assert read.value is None  # None, a flag or a sentinel: that knob sets no limit
    assert read.source.startswith(f"{__name__}.") and "knob(max_calls=" in read.source
    assert " at 0x" not in read.source  # no memory address: the caps doc stays the same from run to run
