"""The scripted investigator: decides the next tool call or the answer from the evidence so far.

It knows nothing about the repository in advance. Each decision is derived
from what the tools returned: the failing assertion in the test output, the
test's body, the search hits for the functions the assertion's value flows
from, and those functions' bodies. It follows the value down, one function a
hop: from the assertion back through the test's assignments to the calls that
produce it, then inside each function read from its `return` back to the calls
that feed it, whether called by name, through a module (`grading.letter()`),
an attribute chain (`self.fees.charge()`) or a class (`Meter.parse()`). A
definition found in several files is taken from the file the caller's imports
point to. The answer names the deepest function read on that path, with the
expected and actual values and the lines read; it states a cause only where a
generic reading of the code shows one (`explain`), and otherwise says what it
could not establish. A tool that returns nothing useful is asked again, which
is what a real model does and what the repetition guard exists for. A test that
is not Python, or output that is not pytest's, gets an answer quoting the
failure and saying so, without following anything.

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
    "OTHER_TARGET",
    "PASSED",
    "SUGGESTION",
    "TARGET",
    "TOOLS_IT_DRIVES",
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
#: A test in another language: what the task names when it names no Python file. Linear for the same reason as TARGET.
OTHER_TARGET = re.compile(
    r"(?<![\w./-])(?P<file>[\w./-]*\.(?:js|mjs|cjs|jsx|ts|mts|cts|tsx|rb|go|rs|java|kt|php|sh|cs|c|cc|cpp|swift|exs?))"
    r"(?![\w.])"
)
EXIT_CODE = re.compile(r"exit code (-?\d{1,9})\n")
#: pytest's closing line (`1 failed, 2 passed in 0.12s`), matched on the output's last line only, cut to
#: MAX_SUMMARY_CHARS.
PYTEST_SUMMARY = re.compile(
    r"\b(?:\d+ (?:passed|failed|errors?|skipped|deselected|xfailed|xpassed)|no tests ran)\b.* in \d"
)
MAX_SUMMARY_CHARS = 300
#: A line of a test run's output that reports a failure, in any language's test runner.
FAILURE_LINE = re.compile(r"\b(?:not ok|fail(?:ed|ure|s)?|error|assert\w*|expected|actual)\b", re.I)
#: What an answer quotes of another test runner's output: at most this many lines, each cut to this many characters,
#: found among its last FOREIGN_SCAN_LINES lines.
FOREIGN_QUOTE_LINES, FOREIGN_QUOTE_CHARS, FOREIGN_SCAN_LINES = 4, 200, 400
#: Functions read on the path from the assertion, at most.
MAX_HOPS = 6
#: Dotted names longer than this (`a.b.c.d...f()`) are not resolved through imports.
MAX_CHAIN = 8
#: The longest assertion text parsed to split it into its two sides.
MAX_ASSERTION_CHARS = 10_000
#: The tools the investigator knows how to call: a case that offers others needs a real model.
TOOLS_IT_DRIVES: frozenset[str] = frozenset({"run_tests", "read_file", "search_code", "write_file"})
#: Parsing Python can fail in more ways than a SyntaxError on hostile input (deep nesting, NUL bytes).
UNPARSABLE = (SyntaxError, ValueError, RecursionError, MemoryError)
#: Longer text is not read as source: parsing costs about 1.5 s and 100 MB a million characters.
MAX_SOURCE_CHARS = 1_000_000
BUILTINS = frozenset(dir(builtins))
#: Methods of the built-in types (`items`, `append`, `quantize` is not one): tried last, they rarely lead anywhere.
BUILTIN_METHODS = frozenset(
    name for kind in (str, bytes, int, float, complex, list, tuple, dict, set, frozenset) for name in dir(kind)
)
#: The names a method reaches its own object and class through.
SELF_NAMES = frozenset({"self", "cls"})


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
            _definitions_in.cache_clear()

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
            if other := OTHER_TARGET.search(conv.task):
                return _not_python(conv, ev, other["file"])
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
        if _foreign_output(output):
            return Decision(answer=_foreign_answer(test_id, output))
        assertion = ASSERTION.search(output)
        line = _failing_line(output, test_file)

        # 3. Read the test (an eager model first finds the suspect from the traceback, then reads both at once).
        test_source = _usable(ev.files.get(test_file), test_name)
        if test_source is None:
            if not eager or ev.failed("read_file", test_file):
                return _ask("read_file", path=test_file)
            return _read_together(ev, test_file, suspects(_traceback_source(output, test_name), test_name, None))

        # 4. Follow the value the failing assertion checks, one function a hop, to where the evidence ends.
        test_tree = _tree(test_source)
        test_node = _function(test_tree, test_name) if test_name and test_tree else None
        failing = _failing_assert(test_node or test_tree, line) if test_tree else None
        values = _values(assertion["expr"], failing) if assertion else None
        hops = [Hop(test_name or test_file, test_file, *_span(test_node or failing or test_tree))]
        sites = _test_sites(test_source, test_name, line)
        caller: tuple[str, str] = (test_file, test_source)
        searched: list[str] = []  # the searches for definitions that were looked at, for the answer
        finding = None
        while len(hops) <= MAX_HOPS:
            step = _next_hop(ev, sites, caller, {(h.name, h.path) for h in hops}, searched)
            if isinstance(step, Decision):
                return step
            if step is None:
                break
            hop, source = step
            hops.append(hop)
            if finding := explain(source, hop.name, hop.path, values=values):
                break
            sites, caller = _function_sites(source, hop.name), (hop.path, source)
        quoted = f"`{assertion['expr']}`" if assertion else None
        return Decision(answer=_answer(test_id, quoted, values, hops, finding, searched))


@dataclass(frozen=True)
class Site:
    """A call in code read: the name a `def` gives it, and the dotted names it is reached through.

    `self.fees.charge(x)` is `charge` through ("self", "fees"); `grading.letter(x)` is `letter` through
    ("grading",); `Meter(s).read()` is `read` through ("Meter",), the class whose instance it is called on;
    a call through anything else (`f()()`, `d[k].g()`) has `through` ("",).
    """

    name: str
    through: tuple[str, ...] = ()


@dataclass(frozen=True)
class Hop:
    """A function read on the path from the assertion: its name, its file and the lines of its definition."""

    name: str
    path: str
    first: int
    last: int


def _next_hop(
    ev: Evidence, sites: list[Site], caller: tuple[str, str], seen: set[tuple[str, str]], searched: list[str]
) -> tuple[Hop, str] | Decision | None:
    """The first of `sites` whose definition is found, with its source; or the call that finds it out; or None
    when none of them leads to a project function (the evidence ends)."""
    caller_path, caller_source = caller
    caller_tree = _tree(caller_source)
    imports = _imports(caller_tree, caller_path) if caller_tree else {}
    for site in sites:
        found = _where(ev, site, caller_path, caller_tree, imports, searched)
        if isinstance(found, Decision):
            return found
        if found is None or (site.name, found) in seen:
            continue
        source = _usable(ev.files.get(found), site.name)
        if source is None:
            return _ask("read_file", path=found)
        func = _function(_tree(source), site.name)
        return Hop(site.name, found, *_span(func)), source
    return None


def _where(
    ev: Evidence,
    site: Site,
    caller_path: str,
    caller_tree: ast.Module | None,
    imports: dict[str, str],
    searched: list[str],
) -> str | Decision | None:
    """The file that defines the function `site` calls: the caller's own when it calls its own function, else the
    search hit the caller's imports point to (else one in a module it imports, else the first); None if no hit."""
    root = site.through[0] if site.through else site.name
    if root not in imports and (not site.through or root in SELF_NAMES):
        if caller_tree is not None and _function(caller_tree, site.name) is not None:
            return caller_path
    query = f"def {site.name}"
    if query not in ev.searches:
        return _ask("search_code", query=query)
    if query not in searched:
        searched.append(query)
    hits = _definitions(ev.searches[query], site.name)
    if not hits:
        return None
    for wanted in _module_files(imports, site):
        if match := next((h for h in hits if _same_file(h, wanted)), None):
            return match
    if caller_path in hits:
        return caller_path
    imported = [f for dotted in imports.values() for f in _prefix_files(dotted.split("."))]
    return next((h for h in hits if any(_same_file(h, f) for f in imported)), hits[0])


def _same_file(hit: str, module_file: str) -> bool:
    """Whether the search hit `hit` is `module_file` (`a/b.py`), at the repository root or under a folder (`src/`)."""
    return hit == module_file or hit.endswith("/" + module_file)


def _files_of(parts: list[str]) -> list[str]:
    """The files a dotted module name may live in: `a.b` is a/b.py or a/b/__init__.py."""
    stem = "/".join(parts)
    return [f"{stem}.py", f"{stem}/__init__.py"] if stem else []


def _module_files(imports: dict[str, str], site: Site) -> list[str]:
    """The files the caller's imports say `site`'s function is in, most specific first.

    `from a.b import f` then `f()`, `import a.b as m` then `m.f()`, `from a.b import C` then `C.f()` or `C().f()`:
    the function is in the longest module named by a prefix of the dotted name, a/b.py here.
    """
    root = site.through[0] if site.through else site.name
    if root not in imports or len(site.through) > MAX_CHAIN:
        return []
    return _prefix_files([*imports[root].split("."), *site.through[1:], *([site.name] if site.through else [])])


def _prefix_files(parts: list[str]) -> list[str]:
    """The files of the modules a dotted name's prefixes name, longest first: `a.b.C.f` -> a/b/C.py, ..., a.py."""
    parts = parts[: MAX_CHAIN + 2]
    return [f for end in range(len(parts) - 1, 0, -1) for f in _files_of(parts[:end])]


def _imports(tree: ast.Module, path: str) -> dict[str, str]:
    """Each name the module at `path` binds by an import, with the dotted name it stands for (relative imports
    resolved against the module's folder)."""
    folder = path.split("/")[:-1]
    bound: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                bound[alias.asname or alias.name.split(".")[0]] = (
                    alias.name if alias.asname else alias.name.split(".")[0]
                )
        elif isinstance(node, ast.ImportFrom):
            base = folder[: len(folder) - (node.level - 1)] if 0 < node.level <= len(folder) + 1 else []
            module = ".".join([*base, *(node.module.split(".") if node.module else [])])
            for alias in node.names:
                if alias.name != "*":
                    bound[alias.asname or alias.name] = f"{module}.{alias.name}" if module else alias.name
    return bound


def _external(imports: dict[str, str]) -> set[str]:
    """The imported names that come from the standard library: never the project's functions."""
    return {name for name, dotted in imports.items() if dotted.split(".")[0] in sys.stdlib_module_names}


def _chain(node: ast.expr) -> tuple[str, ...] | None:
    """The dotted names an expression spells (`self.fees` -> self, fees; `Meter(s)` -> Meter), None if it is
    something else or longer than MAX_CHAIN."""
    parts: list[str] = []
    while len(parts) <= MAX_CHAIN:
        if isinstance(node, ast.Call):  # an instance made by, or a value returned from, the callee
            node = node.func
        elif isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        elif isinstance(node, ast.Name):
            parts.append(node.id)
            return tuple(reversed(parts))
        else:
            return None
    return None


def _site(call: ast.Call) -> Site | None:
    if isinstance(call.func, ast.Name):
        return Site(call.func.id)
    if isinstance(call.func, ast.Attribute):
        return Site(call.func.attr, _chain(call.func.value) or ("",))
    return None


def _flow_sites(
    roots: list[ast.expr], scope: ast.AST, attributes: dict[str, list[ast.expr]], skip: set[str], external: set[str]
) -> list[Site]:
    """The calls whose values flow into `roots`, nearest first: the calls in them, then those in the last (then
    earlier) assignments to the names they use, in `scope`, and to the `self.` attributes they use, in `attributes`.

    Plain calls of names in `skip` are left out, as are calls through names in `external`; methods of the built-in
    types go last.
    """
    assigns: dict[str, list[ast.expr]] = {}
    for n in ast.walk(scope):
        if isinstance(n, ast.Assign):
            for t in n.targets:
                for name in ast.walk(t):
                    if isinstance(name, ast.Name):
                        assigns.setdefault(name.id, []).insert(0, n.value)
        elif isinstance(n, ast.AugAssign | ast.AnnAssign) and isinstance(n.target, ast.Name) and n.value is not None:
            assigns.setdefault(n.target.id, []).insert(0, n.value)
    order: list[Site] = []
    seen: set[Site] = set()
    pending = deque(roots)
    while pending:
        for sub in ast.walk(pending.popleft()):
            if isinstance(sub, ast.Call):
                site = _site(sub)
                left_out = site is None or (site.through[0] in external if site.through else site.name in skip)
                if site and site not in seen and not left_out:
                    order.append(site)
                    seen.add(site)
            elif isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load) and sub.id in assigns:
                pending.extend(assigns.pop(sub.id))
            elif _is_self_attribute(sub) and sub.attr in attributes:
                pending.extend(attributes.pop(sub.attr))
    return sorted(order, key=lambda s: bool(s.through) and s.name in BUILTIN_METHODS)


def _is_self_attribute(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in SELF_NAMES


def _failing_assert(scope: ast.AST, line: int | None) -> ast.Assert | None:
    """The assert at the failing line, else the last one in `scope`."""
    asserts = [n for n in ast.walk(scope) if isinstance(n, ast.Assert)]
    return next((a for a in asserts if line is not None and a.lineno == line), asserts[-1] if asserts else None)


def _test_sites(source: str, test_name: str | None, line: int | None) -> list[Site]:
    """The project calls the failing assertion's value flows from, nearest first (not the test module's own
    helpers, the built-ins or the standard library)."""
    if not source or (tree := _tree(source)) is None:
        return []
    scope = (_function(tree, test_name) if test_name else None) or tree
    failing = _failing_assert(scope, line)
    local_defs = {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)}
    external = _external(_imports(tree, ""))
    return _flow_sites([failing.test] if failing else [], scope, {}, {*external, *local_defs, *BUILTINS}, external)


def suspects(source: str, test_name: str | None, line: int | None) -> list[str]:
    """Project functions the failing assertion's value flows from, nearest first."""
    return list(dict.fromkeys(site.name for site in _test_sites(source, test_name, line)))


def _function_sites(source: str, name: str) -> list[Site]:
    """The calls whose values flow into what function `name` returns, nearest first; all its calls when it returns
    nothing (it works by effect). Not its own local names (callbacks), the built-ins or the standard library."""
    tree = _tree(source)
    func = _function(tree, name) if tree else None
    if tree is None or func is None:
        return []
    owner = next((c for c in ast.walk(tree) if isinstance(c, ast.ClassDef) and func in c.body), None)
    attributes: dict[str, list[ast.expr]] = {}
    for n in ast.walk(owner) if owner else ():
        if isinstance(n, ast.Assign):
            for t in n.targets:
                if _is_self_attribute(t):
                    attributes.setdefault(t.attr, []).insert(0, n.value)
    params = {a.arg for a in ast.walk(func.args) if isinstance(a, ast.arg)} - SELF_NAMES
    local = {n.id for n in ast.walk(func) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    external = _external(_imports(tree, ""))
    skip = {*external, *BUILTINS, *SELF_NAMES, *params, *local, name}
    returns = [n.value for n in ast.walk(func) if isinstance(n, ast.Return) and n.value is not None]
    return _flow_sites(returns or [func], func, attributes, skip, external)


def callees(source: str, name: str) -> list[str]:
    """Functions whose values flow into what `name` returns, nearest first (all it calls if it returns nothing)."""
    return list(dict.fromkeys(site.name for site in _function_sites(source, name)))


def _span(node: ast.AST | None) -> tuple[int, int]:
    """The first and last line of a definition or statement (1, 1 for none)."""
    first = getattr(node, "lineno", 1)
    return first, getattr(node, "end_lineno", None) or first


def _not_python(conv: Conversation, ev: Evidence, test_file: str) -> Decision:
    """A test in another language: run it once, then say what failed and that only Python is followed."""
    output = ev.test_runs.get(test_file)
    if output is None and "run_tests" in conv.tools and not ev.failed("run_tests", test_file):
        return _ask("run_tests", target=test_file)
    if output is None:
        error = ev.errors.get(("run_tests", test_file))
        said = f"running it answered: {_quote_lines(error, 1)}" if error else "it could not be run here"
        return Decision(
            answer=f"{test_file} is not a Python test and {said}. This investigator follows Python code and pytest "
            "output only, so it could not establish the cause."
        )
    return Decision(answer=_foreign_answer(test_file, output))


def _foreign_output(output: str) -> bool:
    """Whether a test run's output (`exit code N` and the text) is another test runner's than pytest's."""
    if not EXIT_CODE.match(output) or ASSERTION.search(output):
        return False
    tail = output.rstrip()
    last = tail[tail.rfind("\n") + 1 :][-MAX_SUMMARY_CHARS:]
    return PYTEST_SUMMARY.search(last) is None


def _foreign_answer(test: str, output: str) -> str:
    """What another test runner's output says, quoted, and that the investigator follows Python and pytest only."""
    code = EXIT_CODE.match(output)
    if code and code[1] == "0":
        return f"{test}: the test command exits 0, so the test passes; there is nothing to investigate."
    status = f" (exit code {code[1]})" if code else ""
    return (
        f"{test} fails{status}; the test run reports: {_quote_lines(output, FOREIGN_QUOTE_LINES)}. "
        "This is not a pytest run of a Python test, and this investigator follows Python code and pytest output "
        "only, so it read no code and could not establish the cause."
    )


def _quote_lines(text: str, most: int) -> str:
    """Up to `most` lines of `text` that report a failure (else its last line), each cut short, quoted."""
    lines = [ln.strip()[:FOREIGN_QUOTE_CHARS] for ln in text.splitlines()[-FOREIGN_SCAN_LINES:] if ln.strip()]
    lines = [ln for ln in lines if not EXIT_CODE.match(ln + "\n")]
    chosen = [ln for ln in lines if FAILURE_LINE.search(ln)][:most] or lines[-1:] or ["(no output)"]
    return " / ".join(f"`{ln}`" for ln in chosen)


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


def _definitions(search_output: str, name: str) -> list[str]:
    """The files of the search hits that define `name` (their text is `def <name>` or `async def <name>`, maybe
    spaces, `(`), in the order found, each once."""
    found: dict[str, None] = {}
    for h in HIT.finditer(search_output):
        text = h["text"].removeprefix("async ")
        head = f"def {name}"
        if text.startswith(head) and text[len(head) :].lstrip().startswith("("):
            found.setdefault(h["path"])
    return list(found)


def _definition(search_output: str, name: str) -> str | None:
    """The file of the first search hit that defines `name`."""
    return next(iter(_definitions(search_output, name)), None)


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


def _function(tree: ast.AST, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The first definition of function `name` in `tree` (in `ast.walk` order)."""
    return _definitions_in(tree).get(name)


@functools.lru_cache(maxsize=8)
def _definitions_in(tree: ast.AST) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """Every function `tree` defines, by name, the first of each: one walk, however many calls are looked up."""
    found: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    for n in ast.walk(tree):
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef):
            found.setdefault(n.name, n)
    return found


# --- what the assertion says ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Values:
    """The two sides of a failing `==` as pytest printed them: which one the test expects, and what it got."""

    expected: str
    actual: str


def _values(expr: str, failing: ast.Assert | None) -> Values | None:
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
    if len(expr) <= MAX_ASSERTION_CHARS and (tree := _tree(expr)) is not None:
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
    tree = _tree(source)
    func = _function(tree, name) if tree else None
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
            rates = " + ".join(_unparse(r).removeprefix("1 - ") for r in (first_rate, rate))
            fix = ""
            if all(_unparse(r).startswith("1 - ") for r in (first_rate, rate)):
                fix = f" Apply the combined rate once to the original value: `* (1 - ({rates}))`."
            elif not any(_unparse(r).startswith("1 - ") for r in (first_rate, rate)) and isinstance(
                stmt, ast.Assign | ast.AugAssign
            ):
                fix = f" Take the combined rate `{rates}` once from the original value."
            return (
                f"it scales `{target}` at {quoted(first)} and then scales the already scaled value again at "
                f"{quoted(stmt)}, so the two rates compound instead of adding up.{fix}"
            )
        scaled.setdefault(target, (stmt, rate))
    return None


def _scaling(stmt: ast.AST) -> tuple[str | None, ast.expr | None, ast.expr | None]:
    """`x = <base> * <rate>`, `x *= <rate>` or `x = <base> - <base> * <rate>`: the target, the base and the rate."""
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
        return stmt.targets[0].id, value.left, value.right.right
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


def _answer(
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
