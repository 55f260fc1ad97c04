"""A team's suite, written from nothing into a folder outside the checkout: two repos of its own and their cases.

`shelf` holds a failing test whose bug is in the function the test calls; `ledger` a bug three calls away, reached
through a method, an attribute of an object and a module attribute. Neither shares a name with looplab's suite.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

__all__ = ["CASES", "TARGET_CASES", "TILL_TARGET", "write_target_suite", "write_team_suite"]

#: Case id -> (the function the answer must name, the file it is in).
CASES = {
    "shelf-restock": ("restock_level", "shelf/stock.py"),
    "ledger-balance": ("settle", "ledger/fees.py"),
}

_FILES = {
    "repos/shelf/shelf/__init__.py": "",
    "repos/shelf/shelf/stock.py": """
        def restock_level(on_hand: int, weekly_sales: int) -> int:
            \"\"\"Units to order so two weeks of sales are covered.\"\"\"
            wanted = weekly_sales * 2
            return wanted + on_hand
    """,
    "repos/shelf/tests/test_stock.py": """
        from shelf.stock import restock_level


        def test_restock_covers_two_weeks():
            assert restock_level(on_hand=5, weekly_sales=10) == 15
    """,
    "repos/ledger/ledger/__init__.py": "",
    "repos/ledger/ledger/fees.py": """
        def settle(amount: float, rate: float) -> float:
            \"\"\"The amount left after the processing fee.\"\"\"
            fee = amount * rate
            left = amount - fee
            left = left - fee
            return round(left, 2)
    """,
    "repos/ledger/ledger/account.py": """
        from ledger import fees


        class Processor:
            def __init__(self, rate: float) -> None:
                self.rate = rate

            def net(self, amount: float) -> float:
                return fees.settle(amount, self.rate)


        class Account:
            def __init__(self, rate: float) -> None:
                self.processor = Processor(rate)
                self.deposits: list[float] = []

            def deposit(self, amount: float) -> None:
                self.deposits.append(amount)

            def balance(self) -> float:
                return self.processor.net(sum(self.deposits))
    """,
    "repos/ledger/tests/test_account.py": """
        from ledger.account import Account


        def test_a_deposit_pays_the_fee_once():
            account = Account(rate=0.1)
            account.deposit(100.0)
            assert account.balance() == 90.0
    """,
}

_CASE = """
id = "{id}"
description = "{description}"
repo = "../repos/{repo}"
target = "{target}"
task = "The test {target} fails. Find out why and propose the fix."

[limits]
max_steps = 14

[checks]
stop_reason = "final_answer"
answer_mentions = ["{function}", "{file}"]
workspace_unchanged = true
"""


def write_team_suite(root: Path) -> Path:
    """The suite folder, written under `root`: its repos, its two cases, no system prompt (looplab's default)."""
    suite = root / "team-suite"
    for name, text in _FILES.items():
        path = suite / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    targets = {
        "shelf-restock": ("shelf", "tests/test_stock.py::test_restock_covers_two_weeks", "restock level too high"),
        "ledger-balance": ("ledger", "tests/test_account.py::test_a_deposit_pays_the_fee_once", "fee taken twice"),
    }
    (suite / "cases").mkdir()
    for case_id, (repo, target, description) in targets.items():
        function, file = CASES[case_id]
        text = _CASE.format(id=case_id, description=description, repo=repo, target=target, function=function, file=file)
        (suite / "cases" / f"{case_id}.toml").write_text(text.lstrip("\n"), encoding="utf-8")
    return suite


#: The failing test of the `till` suite: the target of both its cases, whatever their tasks name.
TILL_TARGET = "tests/test_change.py::test_change_for_a_twenty"
#: Case id -> its task: one that names no test, one that names a test other than the target (one that passes).
TARGET_CASES = {
    "till-unnamed": "Customers get the wrong change at the till. Find out why and propose the fix.",
    "till-other": "The test tests/test_change.py::test_exact_payment_needs_no_change fails. Find out why.",
}

_TILL_FILES = {
    "repo/till/__init__.py": "",
    "repo/till/change.py": """
        def change_due(paid: int, price: int) -> int:
            \"\"\"The change, in cents, for a payment of `paid` cents on a price of `price` cents.\"\"\"
            change = paid - price
            change = change - price
            return change
    """,
    "repo/tests/test_change.py": """
        from till.change import change_due


        def test_exact_payment_needs_no_change():
            assert change_due(0, 0) == 0


        def test_change_for_a_twenty():
            assert change_due(2000, 1250) == 750
    """,
}

_TILL_CASE = """
id = "{id}"
repo = "../repo"
target = "{target}"
task = "{task}"

[checks]
stop_reason = "final_answer"
answer_mentions = ["change_due", "till/change.py", "test_change_for_a_twenty"]
workspace_unchanged = true
"""


def write_target_suite(root: Path) -> Path:
    """A suite written from nothing under `root`: one repo of two Python modules (the bug in the function the
    failing test calls) and two cases on the same target, whose tasks name no test or another one."""
    suite = root / "till-suite"
    for name, text in _TILL_FILES.items():
        path = suite / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    (suite / "cases").mkdir()
    for case_id, task in TARGET_CASES.items():
        text = _TILL_CASE.format(id=case_id, target=TILL_TARGET, task=task)
        (suite / "cases" / f"{case_id}.toml").write_text(text.lstrip("\n"), encoding="utf-8")
    return suite
