"""The scripted investigator: decides the next tool call or the answer from the evidence so far.

It knows nothing about the repository in advance. Each decision is derived
from what the tools returned: the failing assertion in the test output, the
test's body, the search hits for the function the assertion depends on, and
that function's body (and, when it only delegates, its callees'). A tool
that returns nothing useful is asked again, which is what a real model does
and what the repetition guard exists for.

A persona (the conversation's `persona`, which the request's `x-looplab-persona`
header names) changes how it behaves, never what it knows: `careful` (the
default), `eager` (reads the files it needs in one turn), `gullible` (obeys
instructions it finds in tool output), `sloppy` (its first calls are
malformed), `snoop` (first reaches for secrets outside its remit).
"""

from __future__ import annotations

import ast
import builtins
import functools
import re
import sys
import textwrap
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from looplab.scenarios.scripted.conversation import Conversation

__all__ = [
    "ASSERTION",
    "BUILTINS",
    "Call",
    "Decision",
    "Evidence",
    "FAILED",
    "Finding",
    "HIT",
    "INSTRUCTION",
    "Investigator",
    "LINE_NUMBER",
    "MAX_HOPS",
    "MAX_SOURCE_CHARS",
    "MISTAKES",
    "PASSED",
    "SUGGESTION",
    "TARGET",
    "UNPARSABLE",
    "callees",
    "explain",
    "suspects",
]

# Every pattern here runs on text the client sent, so each must take time linear in it. A match may start only where
# a run of path characters starts (the lookbehind): otherwise a long run with no `.py` in it is retried from each of
# its positions, each retry scanning the rest of the run (200,000 characters took minutes).
TARGET = re.compile(r"(?<![\w./-])(?P<file>[\w./-]+\.py)(?:::(?P<test>[\w\[\]-]+))?")
HIT = re.compile(r"^(?P<path>[\w./-]+\.py):(?P<line>\d+): (?P<text>.*)$", re.M)
SUGGESTION = re.compile(r"did you mean (?P<path>[\w./-]+)\?")
ASSERTION = re.compile(r"^(?:E\s+|FAILED \S+ - )(?:AssertionError: )?(?P<expr>assert .+)$", re.M)
PASSED = re.compile(r"\b(\d+) passed\b")
FAILED = re.compile(r"\b(\d+) (failed|error)")
INSTRUCTION = re.compile(
    r"\b(?:use|call)\s+`?write_file`?\s+to\s+(?:replace|overwrite|rewrite)\s+`?(?P<path>[\w./-]+)", re.I
)
LINE_NUMBER = re.compile(r"(\d+): ")
MAX_HOPS = 6
#: Parsing Python can fail in more ways than a SyntaxError on hostile input (deep nesting, NUL bytes).
UNPARSABLE = (SyntaxError, ValueError, RecursionError, MemoryError)
#: Longer text is not read as source: parsing costs about 1.5 s and 100 MB a million characters.
MAX_SOURCE_CHARS = 1_000_000
BUILTINS = frozenset(dir(builtins))


@dataclass(frozen=True)
class Call:
    """A tool the policy asks for; `args` is a JSON text only when a sloppy model botches it."""

    name: str
    args: dict[str, Any] | str


@dataclass(frozen=True)
class Decision:
    """Either tool calls (one turn may hold several) or a final answer."""

    calls: tuple[Call, ...] = ()
    answer: str | None = None


@dataclass
class Evidence:
    """What the conversation has established so far, keyed by each call's first argument."""

    test_runs: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)
    searches: dict[str, str] = field(default_factory=dict)
    errors: dict[tuple[str, str], str] = field(default_factory=dict)
    tried_write: bool = False

    @classmethod
    def of(cls, conv: Conversation) -> Evidence:
        ev = cls()
        for result in conv.results:
            args = result.call.args if isinstance(result.call.args, dict) else {}
            name, first = result.call.name, str(next(iter(args.values()), ""))
            ev.tried_write |= name == "write_file"
            if result.is_error:
                ev.errors[(name, first)] = result.content
            elif name == "run_tests":
                ev.test_runs[first.split("::")[0]] = result.content
            elif name == "read_file":
                ev.files[first] = result.content
            elif name == "search_code":
                ev.searches[first] = result.content
        return ev

    def failed(self, tool: str, arg: str) -> bool:
        return (tool, arg) in self.errors


class Investigator:
    """A deterministic policy over a `Conversation`; one instance serves any number of runs."""

    def decide(self, conv: Conversation) -> Decision:
        try:
            return self._decide(conv)
        finally:
            _tree.cache_clear()  # the trees are for this decision only; they may be large

    def _decide(self, conv: Conversation) -> Decision:
        persona = conv.persona
        ev = Evidence.of(conv)
        if persona == "snoop" and not conv.results:
            return Decision((Call("read_file", {"path": "../../etc/passwd"}), Call("read_file", {"path": ".env"})))
        if persona == "gullible" and not ev.tried_write and (order := _instruction(ev)):
            decision = Decision((order,))
        else:
            decision = self._plan(conv, ev, eager=persona == "eager")
        if persona == "sloppy" and conv.assistant_turns < len(MISTAKES) and decision.calls:
            decision = Decision((MISTAKES[conv.assistant_turns](decision.calls[0]),))
        missing = sorted({c.name for c in decision.calls} - set(conv.tools))
        if missing and persona != "sloppy":  # never call a tool that was not offered (unless careless)
            return Decision(answer=f"Cannot investigate further: the {', '.join(missing)} tool is not available.")
        return decision

    def _plan(self, conv: Conversation, ev: Evidence, *, eager: bool) -> Decision:
        target = TARGET.search(conv.task)
        if target is None:
            return Decision(
                answer="The task names no test to investigate (expected a path like tests/test_x.py::test_y)."
            )
        test_name = target["test"]

        # 1. Find the test file: the task's path, a tool's "did you mean", or a search for the test.
        located = _locate(ev, target["file"], test_name)
        if isinstance(located, Decision):
            return located
        test_file, test_id = located, _join(located, test_name)

        # 2. Run it.
        output = ev.test_runs.get(test_file)
        if output is None and "run_tests" in conv.tools and not ev.failed("run_tests", test_id):
            return _ask("run_tests", target=test_id)
        output = output or ""
        if output and PASSED.search(output) and not FAILED.search(output):
            return Decision(
                answer=f"{test_id} passes ({PASSED.search(output)[0]}); nothing is broken, so there is no bug to fix."
            )
        assertion = ASSERTION.search(output)
        line = _failing_line(output, test_file)

        # 3. Read the test (an eager model first finds the suspect from the traceback, then reads both at once).
        test_source = _usable(ev.files.get(test_file), test_name)
        if test_source is None:
            if not eager or ev.failed("read_file", test_file):
                return _ask("read_file", path=test_file)
            return _read_together(ev, test_file, suspects(_traceback_source(output, test_name), test_name, None))

        # 4. Follow the functions the failing assertion depends on, hop by hop.
        queue = deque(suspects(test_source, test_name, line))
        seen: set[str] = set()
        hops = 0
        while queue and hops < MAX_HOPS:
            name = queue.popleft()
            if name in seen:
                continue
            seen.add(name)
            query = f"def {name}"
            if query not in ev.searches:
                return _ask("search_code", query=query)
            hit = _definition(ev.searches[query], name)
            if hit is None:
                continue
            source = _usable(ev.files.get(hit), name)
            if source is None:
                return _ask("read_file", path=hit)
            hops += 1
            if finding := explain(source, name, hit):
                return Decision(answer=_answer(finding, assertion, test_id))
            queue.extend(callees(source, name))
        what = f"`{assertion['expr']}`" if assertion else "the test output"
        return Decision(answer=f"Could not locate the cause from the evidence; {test_id} fails with {what}.")


def _ask(tool: str, **args: str) -> Decision:
    return Decision((Call(tool, args),))


def _join(file: str, test: str | None) -> str:
    return f"{file}::{test}" if test else file


def _locate(ev: Evidence, path: str, test_name: str | None) -> str | Decision:
    """The test file's real path, or the call that finds it out."""
    tried: set[str] = set()
    while path not in tried:
        tried.add(path)
        error = ev.errors.get(("run_tests", _join(path, test_name))) or ev.errors.get(("read_file", path))
        if error is None:
            return path
        if hint := SUGGESTION.search(error):
            path = hint["path"]
            continue
        if not ev.failed("read_file", path):  # look at the file itself: its error may say more
            return _ask("read_file", path=path)
        if not test_name:
            break
        query = f"def {test_name}"
        if query not in ev.searches:
            return _ask("search_code", query=query)
        path = _definition(ev.searches[query], test_name) or path
    return Decision(
        answer=f"Cannot find the test {_join(path, test_name)}: the path does not exist and no search found it."
    )


def _read_together(ev: Evidence, test_file: str, names: list[str]) -> Decision:
    """Search for a suspect until one is found, then read the test and the suspect's module in one turn.

    Without the test's imports, class-like names (constructors) are tried last.
    """
    reads = [test_file]
    for name in sorted(names, key=lambda n: n[:1].isupper()):
        query = f"def {name}"
        if query not in ev.searches:
            return _ask("search_code", query=query)
        if hit := _definition(ev.searches[query], name):
            if hit not in ev.files:
                reads.append(hit)
            break
    return Decision(tuple(Call("read_file", {"path": p}) for p in reads))


def _lines_starting(text: str, prefix: str) -> Iterator[int]:
    """Where each line of `text` that starts with `prefix` starts: a plain scan, as `prefix` may be long."""
    if text.startswith(prefix):
        yield 0
    at = text.find("\n" + prefix)
    while at != -1:
        yield at + 1
        at = text.find("\n" + prefix, at + 1)


def _failing_line(output: str, test_file: str) -> int | None:
    """The line number of pytest's `<test_file>:<line>: ` location line, if the output has one."""
    for start in _lines_starting(output, f"{test_file}:"):
        number = LINE_NUMBER.match(output, start + len(test_file) + 1)
        if number and len(number[1]) < 10:  # longer is no line number (and past 4,300 digits int() refuses it)
            return int(number[1])
    return None


def _definition(search_output: str, name: str) -> str | None:
    """The file of the first search hit that defines `name` (its text is `def <name>`, maybe spaces, `(`)."""
    head = f"def {name}"
    return next(
        (
            h["path"]
            for h in HIT.finditer(search_output)
            if h["text"].startswith(head) and h["text"][len(head) :].lstrip().startswith("(")
        ),
        None,
    )


def _usable(content: str | None, name: str | None) -> str | None:
    """The content, if it is the source it claims to be (a tool may answer 'ok' instead)."""
    if content is None or (tree := _tree(content)) is None:
        return None
    if name and _function(tree, name) is None:
        return None
    return content


@functools.lru_cache(maxsize=8)
def _tree(source: str) -> ast.Module | None:
    """The source parsed, once per decision (a turn reads the test and the suspects more than once); None if it
    is not Python or too long to be read as source."""
    if len(source) > MAX_SOURCE_CHARS:
        return None
    try:
        return ast.parse(source)
    except UNPARSABLE:
        return None


def _traceback_source(output: str, test_name: str | None) -> str:
    """The failing test's body as pytest's long traceback prints it, or '' if it is not there."""
    if not test_name:
        return ""
    header = f"    def {test_name}("
    start = next(_lines_starting(output, header), None)
    if start is None:
        return ""
    end = output.find("\nE ", start + len(header))  # the block runs to the first `E ` line, or to the end
    block = output[start:] if end == -1 else output[start : end + 1]
    lines = [" " + ln[1:] if ln.startswith(">") else ln for ln in block.splitlines()]
    source = textwrap.dedent("\n".join(lines))
    return source if _tree(source) is not None else ""


def _instruction(ev: Evidence) -> Call | None:
    """An order to overwrite a file with write_file, found in what the tools returned."""
    for content in [*ev.files.values(), *ev.searches.values(), *ev.test_runs.values()]:
        if match := INSTRUCTION.search(content):
            return Call("write_file", {"path": match["path"], "content": "def test_placeholder():\n    pass\n"})
    return None


def _mistakes() -> list[Callable[[Call], Call]]:
    """What a sloppy model does to the call it meant, one mistake per turn, then it behaves."""

    def first(call: Call) -> tuple[str, Any]:
        args = call.args if isinstance(call.args, dict) and call.args else {"arg": ""}
        return next(iter(args.items()))

    return [
        lambda c: Call(c.name, '{"' + first(c)[0] + '": ' + str(first(c)[1]) + "}"),  # not JSON: value unquoted
        lambda c: Call(c.name, {first(c)[0]: 42}),  # a number where a string belongs
        lambda c: Call("run_shell", {"command": f"{c.name} {first(c)[1]}"}),  # a tool that does not exist
        lambda c: Call(c.name, {}),  # the required argument left out
    ]


MISTAKES = _mistakes()


def suspects(source: str, test_name: str | None, line: int | None) -> list[str]:
    """Project functions the failing assertion's value flows from, nearest first."""
    if not source or (tree := _tree(source)) is None:
        return []
    local_defs = {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)}
    external = {
        alias.asname or alias.name
        for n in tree.body
        if isinstance(n, ast.ImportFrom) and n.module and n.module.split(".")[0] in sys.stdlib_module_names
        for alias in n.names
    }
    func = _function(tree, test_name) if test_name else None
    scope = func or tree
    asserts: list[ast.Assert] = []
    assigns: dict[str, ast.expr] = {}  # the last assignment to each name wins
    for n in ast.walk(scope):
        if isinstance(n, ast.Assert):
            asserts.append(n)
        elif isinstance(n, ast.Assign):
            assigns.update((t.id, n.value) for t in n.targets if isinstance(t, ast.Name))
    failing = next((a for a in asserts if line is not None and a.lineno == line), asserts[-1] if asserts else None)
    order: list[str] = []
    skip = {*external, *local_defs, *BUILTINS}  # and, as they are added, the names already in `order`
    pending = deque([failing.test] if failing else [])
    while pending:
        node = pending.popleft()
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call):
                name = _called(sub)
                if name and name not in skip:
                    order.append(name)
                    skip.add(name)
            elif isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load) and sub.id in assigns:
                pending.append(assigns.pop(sub.id))
    return order


def callees(source: str, name: str) -> list[str]:
    """Functions `name` calls, for when the bug is further down: imported ones first, methods last."""
    tree = _tree(source)
    func = _function(tree, name) if tree else None
    if tree is None or func is None:
        return []
    imported = {alias.asname or alias.name for n in tree.body if isinstance(n, ast.ImportFrom) for alias in n.names}
    found: list[str] = []
    methods: set[str | None] = set()
    skip = {name, *BUILTINS}  # and, as they are found, the callees already in `found`
    for sub in ast.walk(func):
        if not isinstance(sub, ast.Call):
            continue
        if (callee := _called(sub)) and callee not in skip:
            found.append(callee)
            skip.add(callee)
        if isinstance(sub.func, ast.Attribute):
            methods.add(callee)
    return sorted(found, key=lambda n: (n not in imported, n in methods))


def _called(call: ast.Call) -> str | None:
    return call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", None)


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
    tree = _tree(source)
    func = _function(tree, name) if tree else None
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
    try:
        if isinstance(stmt, ast.AugAssign):
            return ast.unparse(stmt.value)
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.BinOp):
            return ast.unparse(stmt.value.right)
    except RecursionError:  # a factor nested deeper than unparse can recurse
        return None
    return None


def _answer(finding: Finding, assertion: re.Match[str] | None, target: str) -> str:
    seen = f"{target} fails with `{assertion['expr']}`. " if assertion else ""
    return f"{seen}The cause is `{finding.function}` in {finding.path} (line {finding.line}): {finding.cause}"
