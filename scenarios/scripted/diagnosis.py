"""What the scripted investigator concludes: the values a failing assertion compares, a cause where the code read
shows one, and the answer.

A cause is stated only from readings true of any code (`explain`): a value scaled and the scaled value scaled
again, the same operand applied twice by the same operator, floor division where the test expects a fraction.
Otherwise the answer names where the evidence ends and says what could not be established.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from looplab.scenarios.scripted.reading import Hop, function_named, parse

#: The longest assertion text parsed to split it into its two sides.
MAX_ASSERTION_CHARS = 10_000


# --- what the assertion says ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Values:
    """The two sides of a failing `==` as pytest printed them: which one the test expects, and what it got."""

    expected: str
    actual: str


def values_of(expr: str, failing: ast.Assert | None) -> Values | None:
    """The expected and actual values of pytest's `assert <left> == <right>`: the side that is a literal in the
    test's own assertion is the expected one (the right side when neither or both are)."""
    sides = _sides(expr)
    if sides is None:
        return None
    left, right = sides
    compared = failing.test if failing else None
    if isinstance(compared, ast.Compare) and len(compared.ops) == 1 and isinstance(compared.ops[0], ast.Eq):
        if _literal(compared.left) and not _literal(compared.comparators[0]):
            return Values(expected=left, actual=right)
    return Values(expected=right, actual=left)


def _sides(expr: str) -> tuple[str, str] | None:
    """`assert <left> == <right>`'s two sides, parsed when they are Python (reprs usually are), else split at the
    one ` == `."""
    if len(expr) <= MAX_ASSERTION_CHARS and (tree := parse(expr)) is not None:
        node = tree.body[0] if len(tree.body) == 1 else None
        test = node.test if isinstance(node, ast.Assert) else None
        if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq):
            left, right = (ast.get_source_segment(expr, n) for n in (test.left, test.comparators[0]))
            return (left, right) if left and right else None
        return None
    body = expr.removeprefix("assert ")
    at = body.find(" == ")
    if at == -1 or body.find(" == ", at + 1) != -1:
        return None
    return body[:at].strip(), body[at + 4 :].strip()


def _literal(node: ast.expr) -> bool:
    """Whether an expression is a value written out (`90`, `'A'`, `Decimal("9.50")`, `[1, 2]`): no name in it
    but the callees of calls."""
    callees: set[int] = set()
    for call in ast.walk(node):
        if isinstance(call, ast.Call):
            func = call.func
            while isinstance(func, ast.Attribute):  # down the callee's dotted name, not into calls inside it
                func = func.value
            callees.add(id(func))
    return not any(isinstance(n, ast.Name) and id(n) not in callees for n in ast.walk(node))


# --- what the code read shows -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Finding:
    """A cause the code read shows: in function `function` of `path`, defined at `line`."""

    function: str
    path: str
    line: int
    cause: str


def explain(source: str, name: str, path: str, *, values: Values | None = None) -> Finding | None:
    """A cause read from function `name`'s body, by readings true of any code: a value scaled and the scaled value
    scaled again (the rates compound); the same operand applied twice by the same operator to one value; floor
    division where the test expects a fraction. None when the body shows none of these."""
    tree = parse(source)
    func = function_named(tree, name) if tree else None
    if func is None:
        return None
    lines = source.splitlines()

    def quoted(node: ast.AST) -> str:
        return f"line {node.lineno} (`{lines[node.lineno - 1].strip()}`)"

    for detect in (_compounding, _applied_twice, _floor_division):
        if cause := detect(func, quoted, values):
            return Finding(name, path, func.lineno, cause)
    return None


Quote = Callable[[ast.AST], str]


def _compounding(func: ast.AST, quoted: Quote, values: Values | None) -> str | None:
    """`x = a * r1` (or `a - a * r1`) and later `x = x * r2` (or `x - x * r2`): the second rate scales the value
    the first already scaled, so the rates multiply where they were meant to add up."""
    scaled: dict[str, tuple[ast.stmt, ast.expr]] = {}
    for stmt in ast.walk(func):
        target, base, rate = _scaling(stmt)
        if target is None or base is None or rate is None:
            continue
        if target in scaled and _names(base) == {target}:
            first, first_rate = scaled[target]
            if _unparse(first_rate) == _unparse(rate):
                return (
                    f"it scales `{target}` by `{_unparse(rate)}` at {quoted(first)} and by the same factor again, "
                    f"to the already scaled value, at {quoted(stmt)}: the factor is applied twice."
                )
            return (
                f"it scales `{target}` at {quoted(first)} and then scales the already scaled value again at "
                f"{quoted(stmt)}, so the two rates compound instead of adding up.{_combined_rate(first_rate, rate)}"
            )
        scaled.setdefault(target, (stmt, rate))
    return None


def _combined_rate(first: ast.expr, second: ast.expr) -> str:
    """The fix for two factors that compound, where the code shows what adding them up means: both `1 - r` (or
    both `1 + r`) combine into `1 - (r1 + r2)`. Factors of any other form (a bare rate, one of each) show no sum
    the code means, so no fix is proposed."""
    parts = [_one_and(f) for f in (first, second)]
    if parts[0] is None or parts[1] is None or parts[0][0] != parts[1][0]:
        return ""
    sign = parts[0][0]
    rates = " + ".join(_unparse(rate) for _, rate in parts)
    return f" Apply the combined rate once to the original value: `* (1 {sign} ({rates}))`."


def _one_and(factor: ast.expr) -> tuple[str, ast.expr] | None:
    """`1 - r` -> ('-', r), `1 + r` -> ('+', r); None for any other factor."""
    if (
        isinstance(factor, ast.BinOp)
        and isinstance(factor.op, ast.Sub | ast.Add)
        and isinstance(factor.left, ast.Constant)
        and factor.left.value == 1
        and not isinstance(factor.left.value, bool)
    ):
        return ("-" if isinstance(factor.op, ast.Sub) else "+"), factor.right
    return None


def _scaling(stmt: ast.AST) -> tuple[str | None, ast.expr | None, ast.expr | None]:
    """`x = <base> * <rate>`, `x *= <rate>` or `x = <base> - <base> * <rate>`: the target, the base and the factor
    (`1 - <rate>` for the last)."""
    if isinstance(stmt, ast.AugAssign) and isinstance(stmt.op, ast.Mult) and isinstance(stmt.target, ast.Name):
        return stmt.target.id, ast.Name(stmt.target.id, ast.Load()), stmt.value
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
        return None, None, None
    value = stmt.value
    if isinstance(value, ast.BinOp) and isinstance(value.op, ast.Mult):
        return stmt.targets[0].id, value.left, value.right
    if (
        isinstance(value, ast.BinOp)
        and isinstance(value.op, ast.Sub)
        and isinstance(value.right, ast.BinOp)
        and isinstance(value.right.op, ast.Mult)
        and _unparse(value.right.left) == _unparse(value.left)
    ):
        # `x - x * r` scales by `1 - r`: said so, the fix reads the same as for `x * (1 - r)`.
        factor = ast.BinOp(ast.Constant(1), ast.Sub(), value.right.right)
        return stmt.targets[0].id, value.left, factor
    return None, None, None


OPERATIONS = {ast.Add: "added", ast.Sub: "subtracted", ast.Mult: "multiplied in", ast.Div: "divided out"}


def _applied_twice(func: ast.AST, quoted: Quote, values: Values | None) -> str | None:
    """`x = a - d` then `x -= d` (or `return x - d`): the same operand applied twice, by the same operator, to one
    value on its way out."""
    applied: dict[tuple[str, type, str], ast.AST] = {}
    for node in ast.walk(func):
        for target, base, op, operand in _adjustments(node):
            text = _unparse(operand)
            if not text or type(op) not in OPERATIONS:
                continue
            if base is not None and (earlier := applied.get((base, type(op), text))):
                return (
                    f"`{text}` is {OPERATIONS[type(op)]} twice: at {quoted(earlier)} and again, to the result, at "
                    f"{quoted(node)}."
                )
            if target is not None:
                applied.setdefault((target, type(op), text), node)
    return None


def _adjustments(node: ast.AST) -> Iterator[tuple[str | None, str | None, ast.operator, ast.expr]]:
    """What a statement does to a named value: (the name it assigns or None for a return, the name of the value it
    adjusts, the operator, the operand)."""
    if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
        yield node.target.id, node.target.id, node.op, node.value
    elif isinstance(node, ast.Assign | ast.Return) and isinstance(node.value, ast.BinOp):
        target = None
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            target = node.targets[0].id
        left = node.value.left
        base = left.id if isinstance(left, ast.Name) else None
        yield target, base, node.value.op, node.value.right


def _floor_division(func: ast.AST, quoted: Quote, values: Values | None) -> str | None:
    """`a // b` where the test expects a number with a fraction and got a whole one: floor division drops it."""
    if values is None or not (_fraction(values.expected) and _whole(values.actual)):
        return None
    division = next((n for n in ast.walk(func) if isinstance(n, ast.BinOp) and isinstance(n.op, ast.FloorDiv)), None)
    if division is None:
        return None
    return (
        f"it divides with `//` at {quoted(division)}: floor division drops the fraction, so it gives "
        f"{values.actual} where the test expects {values.expected}."
    )


def _fraction(text: str) -> bool:
    try:
        return not float(text).is_integer()
    except (ValueError, OverflowError):
        return False


def _whole(text: str) -> bool:
    try:
        return float(text).is_integer()
    except (ValueError, OverflowError):
        return False


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _unparse(node: ast.AST) -> str:
    try:
        return ast.unparse(node)
    except RecursionError:  # an operand nested deeper than unparse can recurse
        return ""


# --- the answer -------------------------------------------------------------------------------------------------


def write_answer(
    test_id: str,
    assertion: str | None,
    values: Values | None,
    hops: list[Hop],
    finding: Finding | None,
    searched: list[str],
) -> str:
    """The answer: what fails, with which values; where the evidence ends; what was read; the cause the code read
    shows, or what could not be established."""
    if values:
        head = f"{test_id} fails: expected {values.expected}, got {values.actual} ({assertion})."
    else:
        head = f"{test_id} fails with {assertion}." if assertion else f"{test_id} fails (no assertion in its output)."
    followed = " -> ".join(f"`{h.name}` ({h.path})" for h in hops)
    read = "Read: " + ", ".join(f"{h.path} {h.first}-{h.last}" for h in hops) + "."
    if finding:
        return (
            f"{head} The cause is `{finding.function}` in {finding.path} (line {finding.line}): {finding.cause} "
            f"Followed: {followed}. {read}"
        )
    wrong = f"makes the test get {values.actual} instead of {values.expected}" if values else "fails the assertion"
    if len(hops) == 1:
        tried = f" (searched: {', '.join(searched)})" if searched else ""
        return (
            f"{head} The evidence ends at the test itself: no project function that the assertion's value comes "
            f"from was found{tried}. {read} It could not establish the cause."
        )
    end = hops[-1]
    return (
        f"{head} The evidence ends at `{end.name}` in {end.path} (line {end.first}), followed from the assertion: "
        f"{followed}. {read} The code read shows no cause by itself: it could not establish what in `{end.name}` "
        f"{wrong}, nor whether a value it takes from outside what was read (a constant, a data file, an argument) "
        "is wrong."
    )
