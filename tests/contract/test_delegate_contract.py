"""The delegate's contract (`adapters/contract/agents.py`): what a runner that writes the delegating tool reads."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st


@given(args=st.one_of(st.text(), st.dictionaries(st.text(), st.one_of(st.none(), st.integers(), st.text()))))
def test_the_delegates_question_is_read_from_any_arguments_or_refused_in_one_line(args: object) -> None:
    from looplab.scenarios.cases import DelegateSpec

    delegate = DelegateSpec().agent()
    for sent in (args, json.dumps(args)):
        try:
            question = delegate.question_in(sent)
        except ValueError as bad:
            assert str(bad) == "InvalidArguments: code_reader takes a 'question' string"
        else:
            assert isinstance(args, dict) and question == args["question"]
