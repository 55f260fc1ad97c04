"""The scripted investigator: decides the next tool call or the answer from the evidence so far.

It knows nothing about the repository in advance. Each decision is derived
from what the tools returned: the failing assertion in the test output, the
test's body, the search hits for the function the assertion depends on, and
that function's body (and, when it only delegates, its callees'). A tool
that returns nothing useful is asked again, which is what a real model does
and what the repetition guard exists for.
"""

from __future__ import annotations

import ast
import builtins
import re
import sys
from dataclasses import dataclass, field

from scenarios.scripted.conversation import Conversation, ToolResult

TARGET = re.compile(r"(?P<file>[\w./-]+\.py)(?:::(?P<test>[\w\[\]-]+))?")
HIT = re.compile(r"^(?P<path>[\w./-]+\.py):(?P<line>\d+): (?P<text>.*)$", re.M)
SUGGESTION = re.compile(r"did you mean (?P<path>[\w./-]+)\?")
ASSERTION = re.compile(r"^E\s+(?:AssertionError: )?(?P<expr>assert .+)$", re.M)
PASSED = re.compile(r"\b(\d+) passed\b")
FAILED = re.compile(r"\b(\d+) (failed|error)")
MAX_HOPS = 6
BUILTINS = frozenset(dir(builtins))


@dataclass(frozen=True)
class Call:
    """A tool the policy asks for."""

    name: str
    args: dict[str, str]


@dataclass(frozen=True)
class Decision:
    """Either tool calls (one turn may hold several) or a final answer."""

    calls: tuple[Call, ...] = ()
    answer: str | None = None


@dataclass
class Evidence:
    """What the conversation has established so far."""

    test_output: ToolResult | None = None
    files: dict[str, str] = field(default_factory=dict)
    searches: dict[str, ToolResult] = field(default_factory=dict)
    errors: dict[tuple[str, str], ToolResult] = field(default_factory=dict)

    @classmethod
    def of(cls, conv: Conversation) -> Evidence:
        ev = cls()
        for result in conv.results:
            args = result.call.args if isinstance(result.call.args, dict) else {}
            key = (result.call.name, str(next(iter(args.values()), "")))
            if result.is_error:
                ev.errors[key] = result
            elif result.call.name == "run_tests":
                ev.test_output = result
            elif result.call.name == "read_file":
                ev.files[key[1]] = result.content
            elif result.call.name == "search_code":
                ev.searches[key[1]] = result
        return ev


class Investigator:
    """A deterministic policy over a `Conversation`; one instance serves any number of runs."""

    def decide(self, conv: Conversation) -> Decision:
        decision = self._next(conv)
        missing = sorted({c.name for c in decision.calls} - set(conv.tools))
        if missing:  # never call a tool that was not offered
            return Decision(answer=f"Cannot investigate further: the {', '.join(missing)} tool is not available.")
        return decision

    def _next(self, conv: Conversation) -> Decision:
        ev = Evidence.of(conv)
        target = TARGET.search(conv.task)
        if target is None:
            return Decision(
                answer="The task names no test to investigate (expected a path like tests/test_x.py::test_y)."
            )
        test_file, test_name = target["file"], target["test"]

        # 1. Run the test, unless that is impossible or done.
        if ev.test_output is None and "run_tests" in conv.tools:
            failed = ev.errors.get(("run_tests", target[0]))
            if failed is None:
                return _ask("run_tests", target=target[0])
            if hint := SUGGESTION.search(failed.content):
                test_file = hint["path"]
                if ("run_tests", _join(test_file, test_name)) not in ev.errors:
                    return _ask("run_tests", target=_join(test_file, test_name))
        output = ev.test_output.content if ev.test_output else ""
        if output and PASSED.search(output) and not FAILED.search(output):
            return Decision(
                answer=f"{target[0]} passes ({PASSED.search(output)[0]}); nothing is broken, so there is no bug to fix."
            )
        assertion = ASSERTION.search(output)
        location = re.search(r"^(?P<file>[\w./-]+\.py):(?P<line>\d+): \w+", output, re.M)
        if location and location["file"].endswith(test_file.rsplit("/", 1)[-1]):
            test_file = location["file"]

        # 2. Read the test, following "did you mean" or a search when the path is wrong.
        test_source = _usable(ev.files.get(test_file), test_name)
        if test_source is None:
            path = _find_file(ev, test_file, f"def {test_name}" if test_name else None)
            if isinstance(path, Call):
                return Decision((path,))
            test_file = path or test_file
            test_source = _usable(ev.files.get(test_file), test_name)
            if test_source is None:
                return _ask("read_file", path=test_file)

        # 3. Follow the functions the failing assertion depends on, hop by hop.
        queue = suspects(
            test_source, test_name, int(location["line"]) if location and location["file"] == test_file else None
        )
        seen: set[str] = set()
        hops = 0
        while queue and hops < MAX_HOPS:
            name = queue.pop(0)
            if name in seen:
                continue
            seen.add(name)
            query = f"def {name}"
            if query not in ev.searches:
                return _ask("search_code", query=query)
            hit = next((h for h in HIT.finditer(ev.searches[query].content) if h["text"].startswith(query)), None)
            if hit is None:
                continue
            source = _usable(ev.files.get(hit["path"]), name)
            if source is None:
                return _ask("read_file", path=hit["path"])
            hops += 1
            finding = explain(source, name, hit["path"])
            if finding:
                return Decision(answer=_answer(finding, assertion, target[0]))
            queue.extend(callees(source, name))
        what = f"`{assertion['expr']}`" if assertion else "the test output"
        return Decision(answer=f"Could not locate the cause from the evidence; {target[0]} fails with {what}.")


def _ask(tool: str, **args: str) -> Decision:
    return Decision((Call(tool, args),))


def _join(file: str, test: str | None) -> str:
    return f"{file}::{test}" if test else file


def _usable(content: str | None, name: str | None) -> str | None:
    """The content, if it is the source it claims to be (a tool may answer 'ok' instead)."""
    if content is None:
        return None
    try:
        tree = ast.parse(content)
    except SyntaxError:
        return None
    if name and not any(isinstance(n, ast.FunctionDef) and n.name == name for n in ast.walk(tree)):
        return None
    return content


def _find_file(ev: Evidence, path: str, query: str | None) -> str | Call | None:
    """Recover from a wrong path: take the tool's suggestion, else search for the definition."""
    error = ev.errors.get(("read_file", path))
    if error is None:
        return None
    if (hint := SUGGESTION.search(error.content)) and ("read_file", hint["path"]) not in ev.errors:
        return hint["path"]
    if query and query not in ev.searches:
        return Call("search_code", {"query": query})
    if query:
        hit = next((h for h in HIT.finditer(ev.searches[query].content)), None)
        return hit["path"] if hit else None
    return None


def suspects(source: str, test_name: str | None, line: int | None) -> list[str]:
    """Project functions the failing assertion's value flows from, nearest first."""
    tree = ast.parse(source)
    local_defs = {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)}
    external = {
        alias.asname or alias.name
        for n in tree.body
        if isinstance(n, ast.ImportFrom) and n.module and n.module.split(".")[0] in sys.stdlib_module_names
        for alias in n.names
    }
    func = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == test_name), tree)
    asserts = [n for n in ast.walk(func) if isinstance(n, ast.Assert)]
    failing = next((a for a in asserts if line is not None and a.lineno == line), asserts[-1] if asserts else None)
    assigns = {
        t.id: n.value for n in ast.walk(func) if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)
    }
    order: list[str] = []
    pending = [failing.test] if failing else []
    while pending:
        node = pending.pop(0)
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call):
                name = sub.func.attr if isinstance(sub.func, ast.Attribute) else getattr(sub.func, "id", None)
                if name and name not in order and name not in external | local_defs | BUILTINS:
                    order.append(name)
            elif isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load) and sub.id in assigns:
                pending.append(assigns.pop(sub.id))
    return order


def callees(source: str, name: str) -> list[str]:
    """Functions `name` calls, for when the bug is further down the chain."""
    func = _function(ast.parse(source), name)
    found: list[str] = []
    for sub in ast.walk(func) if func else ():
        if isinstance(sub, ast.Call):
            callee = sub.func.attr if isinstance(sub.func, ast.Attribute) else getattr(sub.func, "id", None)
            if callee and callee not in BUILTINS and callee not in found and callee != name:
                found.append(callee)
    return found


def _function(tree: ast.AST, name: str) -> ast.FunctionDef | None:
    return next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name), None)


@dataclass(frozen=True)
class Finding:
    function: str
    path: str
    line: int
    cause: str


def explain(source: str, name: str, path: str) -> Finding | None:
    """A cause read from the function's body: a value scaled, then scaled again (compounding)."""
    func = _function(ast.parse(source), name)
    if func is None:
        return None
    lines = source.splitlines()
    scaled: dict[str, ast.stmt] = {}
    for stmt in ast.walk(func):
        target, value = _scaling(stmt)
        if target is None:
            continue
        if target in scaled and _uses(value, target):
            first = scaled[target]
            factors = [_factor(s) for s in (first, stmt)]
            fix = ""
            if all(f and f.startswith("1 - ") for f in factors):
                rates = " + ".join(f[4:] for f in factors if f)
                fix = f" Apply the combined rate once to the original value: `* (1 - ({rates}))`."
            first_line, second_line = lines[first.lineno - 1].strip(), lines[stmt.lineno - 1].strip()
            cause = (
                f"it scales `{target}` at line {first.lineno} (`{first_line}`) and then scales the already scaled "
                f"value again at line {stmt.lineno} (`{second_line}`), so the two rates compound instead of adding "
                f"up.{fix}"
            )
            return Finding(name, path, func.lineno, cause)
        scaled.setdefault(target, stmt)
    return None


def _scaling(stmt: ast.AST) -> tuple[str | None, ast.expr | None]:
    """`x = <expr> * <factor>` or `x *= <factor>`: the target name and the value expression."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
        if isinstance(stmt.value, ast.BinOp) and isinstance(stmt.value.op, ast.Mult):
            return stmt.targets[0].id, stmt.value
    if isinstance(stmt, ast.AugAssign) and isinstance(stmt.op, ast.Mult) and isinstance(stmt.target, ast.Name):
        return stmt.target.id, ast.BinOp(ast.Name(stmt.target.id, ast.Load()), ast.Mult(), stmt.value)
    return None, None


def _uses(value: ast.expr | None, name: str) -> bool:
    return value is not None and any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(value))


def _factor(stmt: ast.stmt) -> str | None:
    value = stmt.value if isinstance(stmt, ast.Assign | ast.AugAssign) else None
    if isinstance(stmt, ast.AugAssign):
        return ast.unparse(stmt.value)
    if isinstance(value, ast.BinOp):
        return ast.unparse(value.right)
    return None


def _answer(finding: Finding, assertion: re.Match[str] | None, target: str) -> str:
    seen = f"{target} fails with `{assertion['expr']}`. " if assertion else ""
    return f"{seen}The cause is `{finding.function}` in {finding.path} (line {finding.line}): {finding.cause}"
