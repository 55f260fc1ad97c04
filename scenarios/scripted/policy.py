"""The scripted investigator: decides the next tool call or the answer from the evidence so far.

It knows nothing about the repository in advance. Each decision is derived
from what the tools returned: the failing assertion in the test output, the
test's body, the search hits for the functions the assertion's value flows
from, and those functions' bodies. It follows the value down, one function a
hop (which calls, and which file defines each: `reading`); the answer names the
deepest function read on that path, with the expected and actual values and the
lines read, and a cause only where the code read shows one (`diagnosis`). A
tool that returns nothing useful is asked again, which is what a real model
does and what the repetition guard exists for. A test that is not Python, or
output that is not pytest's, gets an answer quoting the failure and saying so,
without following anything.

A persona (the conversation's `persona`, which the request's `x-looplab-persona`
header names) changes how it behaves, never what it knows: `careful` (the
default), `eager` (reads the files it needs in one turn), `gullible` (obeys
instructions it finds in tool output), `sloppy` (its first calls are
malformed), `snoop` (first reaches for secrets outside its remit), `restless` (as
a delegate, never concludes: after its first search it searches for one more use of
the function after another; as the investigator it is `careful`), `fanout` (hands
every function the value flows through that is defined elsewhere to its delegate at
once, a question each, in one reply, instead of one after the other), `noisy` (plays
`careful`, but any turn may go wrong by chance: a malformed call, a read of the wrong
file, or an answer given too early; its dice are seeded by the request's
`x-looplab-seed` header, the agent and the turn, so a seed plays the same every time:
`slip`).

A delegate answers its one question (`Delegate.question`) by searching and reading,
or, where it is offered a delegating tool of its own (a nested tree), by handing the
same question on and answering with what comes back.
"""

from __future__ import annotations

import ast
import re
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, field

from looplab.adapters.contract.agents import QUESTION, Delegate
from looplab.scenarios.scripted.conversation import Conversation
from looplab.scenarios.scripted.diagnosis import explain, values_of, write_answer
from looplab.scenarios.scripted.reading import (
    SELF_NAMES,
    Hop,
    Site,
    clear_caches,
    failing_assert,
    function_named,
    function_sites,
    imports_of,
    module_files,
    parse,
    prefix_files,
    same_file,
    span,
    suspects,
    test_sites,
)
from looplab.scenarios.scripted.slips import MISTAKES, Call, Decision, dice_of, elsewhere, slip_of
from looplab.scenarios.target import STATED

__all__ = ["Call", "Decision"]

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
#: pytest's word that the test id it was given names no test it collected (or that it collected none at all).
NOT_COLLECTED = re.compile(r"^ERROR: not found: |\bno tests ran\b", re.M)
#: pytest's closing line (`1 failed, 2 passed in 0.12s`), matched on the output's last line only, cut to
#: MAX_SUMMARY_CHARS.
PYTEST_SUMMARY = re.compile(
    r"\b(?:\d+ (?:passed|failed|errors?|skipped|deselected|xfailed|xpassed)|no tests ran)\b.* in \d"
)
MAX_SUMMARY_CHARS = 300
#: A delegate's answer (`_read_definition`): the function, the file that defines it, and the file's text.
REPORT = re.compile(r"`(?P<name>\w+)` is defined in (?P<path>[\w./-]+\.py):\n```python\n(?P<source>.*)\n```", re.S)
#: A line of a test run's output that reports a failure, in any language's test runner.
FAILURE_LINE = re.compile(r"\b(?:not ok|fail(?:ed|ure|s)?|error|assert\w*|expected|actual)\b", re.I)
#: What an answer quotes of another test runner's output: at most this many lines, each cut to this many characters,
#: found among its last FOREIGN_SCAN_LINES lines.
FOREIGN_QUOTE_LINES, FOREIGN_QUOTE_CHARS, FOREIGN_SCAN_LINES = 4, 200, 400
#: Functions read on the path from the assertion, at most.
MAX_HOPS = 6
#: The tools the investigator knows how to call: a case that offers others needs a real model.
TOOLS_IT_DRIVES: frozenset[str] = frozenset({"run_tests", "read_file", "search_code", "write_file"})


@dataclass
class Evidence:
    """What the conversation has established so far, keyed by each call's first argument."""

    test_runs: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)
    searches: dict[str, str] = field(default_factory=dict)
    errors: dict[tuple[str, str], str] = field(default_factory=dict)
    tried_write: bool = False
    #: The functions handed to the delegate (`Conversation.delegate`), whatever it answered.
    delegated: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, conv: Conversation) -> Evidence:
        ev = cls()
        for result in conv.results:
            args = result.call.args if isinstance(result.call.args, dict) else {}
            name, first = result.call.name, str(next(iter(args.values()), ""))
            ev.tried_write |= name == "write_file"
            if name == conv.delegate and conv.delegate is not None:
                ev._reported(first, result.content)
            elif result.is_error:
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

    def _reported(self, question: str, answer: str) -> None:
        """What the delegate answered to `question`: the file that defines the function, and its text, as if this
        agent had searched and read them itself (an answer that is not such a report adds nothing)."""
        if (asked := QUESTION.search(question)) is None:
            return
        self.delegated.add(asked["name"])
        if (report := REPORT.search(_unframed(answer))) and report["name"] == asked["name"]:
            self.searches[f"def {report['name']}"] = f"{report['path']}:1: def {report['name']}("
            self.files[report["path"]] = report["source"]


def _unframed(answer: str) -> str:
    """A delegate's report as it wrote it, where its framework hands it back framed, each line indented alike
    (Claude Code: "[Subagent hand-back]" and two spaces a line): the indent of the report's first line taken off."""
    start = re.search(r"^([ \t]+)`\w+` is defined in ", answer, re.M)
    if start is None:
        return answer
    pad = start[1]
    lines = answer[start.start() :].split("\n")
    return "\n".join(line.removeprefix(pad) for line in lines)


class Investigator:
    """A deterministic policy over a `Conversation`; one instance serves any number of runs."""

    def decide(self, conv: Conversation) -> Decision:
        try:
            return self._decide(conv)
        finally:
            clear_caches()  # the trees are for this decision only; they may be large

    def _decide(self, conv: Conversation) -> Decision:
        persona = conv.persona
        ev = Evidence.of(conv)
        if asked := QUESTION.search(conv.task):  # this agent is the delegate: it answers one question
            if persona == "restless" and (searched := len(ev.searches) + len(ev.errors)):
                # It never concludes: one more search for a use of the function, a new query every time.
                return _ask("search_code", query=f"{asked['name']} use {searched}")
            if conv.delegate is not None and not conv.results:  # a nested tree: it hands its question on first
                return Decision((Call(conv.delegate, conv.delegate_args(conv.task)),))
            return _read_definition(ev, asked["name"])
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
        return _noisy(conv, ev, decision) if persona == "noisy" else decision

    def _plan(self, conv: Conversation, ev: Evidence, *, eager: bool) -> Decision:
        # A target the task states on a line of its own wins over any other test the wording names.
        named = stated[0] if (stated := STATED.search(conv.task)) else conv.task
        target = TARGET.search(named)
        if target is None:
            if other := OTHER_TARGET.search(named):
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
        if test_source is None and (missing := _not_found(output, ev.files.get(test_file), test_id, test_name)):
            return Decision(answer=missing)
        if test_source is None:
            if not eager or ev.failed("read_file", test_file):
                return _ask("read_file", path=test_file)
            return _read_together(ev, test_file, suspects(_traceback_source(output, test_name), test_name, None))

        # 4. Follow the value the failing assertion checks, one function a hop, to where the evidence ends.
        test_tree = parse(test_source)
        test_node = function_named(test_tree, test_name) if test_name and test_tree else None
        failing = failing_assert(test_node or test_tree, line) if test_tree else None
        values = values_of(assertion["expr"], failing) if assertion else None
        hops = [Hop(test_name or test_file, test_file, *span(test_node or failing or test_tree))]
        sites = test_sites(test_source, test_name, line)
        caller: tuple[str, str] = (test_file, test_source)
        searched: list[str] = []  # the searches for definitions that were looked at, for the answer
        finding = None
        while len(hops) <= MAX_HOPS:
            step = _next_hop(conv, ev, sites, caller, {(h.name, h.path) for h in hops}, searched)
            if isinstance(step, Decision):
                return step
            if step is None:
                break
            hop, source = step
            hops.append(hop)
            if finding := explain(source, hop.name, hop.path, values=values):
                break
            sites, caller = function_sites(source, hop.name), (hop.path, source)
        quoted = f"`{assertion['expr']}`" if assertion else None
        return Decision(answer=write_answer(test_id, quoted, values, hops, finding, searched))


def _next_hop(
    conv: Conversation,
    ev: Evidence,
    sites: list[Site],
    caller: tuple[str, str],
    seen: set[tuple[str, str]],
    searched: list[str],
) -> tuple[Hop, str] | Decision | None:
    """The first of `sites` whose definition is found, with its source; or the call that finds it out; or None
    when none of them leads to a project function (the evidence ends)."""
    caller_path, caller_source = caller
    caller_tree = parse(caller_source)
    imports = imports_of(caller_tree, caller_path) if caller_tree else {}
    for site in sites:
        found = _where(conv, ev, site, caller_path, caller_tree, imports, searched)
        if isinstance(found, Decision):
            if conv.persona == "fanout" and _delegation(conv, found):
                return _fan_out(conv, ev, sites, caller_tree, imports)
            return found
        if found is None or (site.name, found) in seen:
            continue
        source = _usable(ev.files.get(found), site.name)
        if source is None:
            return _ask("read_file", path=found)
        func = function_named(parse(source), site.name)
        return Hop(site.name, found, *span(func)), source
    return None


def _where(
    conv: Conversation,
    ev: Evidence,
    site: Site,
    caller_path: str,
    caller_tree: ast.Module | None,
    imports: dict[str, str],
    searched: list[str],
) -> str | Decision | None:
    """The file that defines the function `site` calls: the caller's own when it calls its own function, else the
    search hit the caller's imports point to (else one in a module it imports, else the first); None if no hit."""
    if _own(site, caller_tree, imports):
        return caller_path
    query = f"def {site.name}"
    if _to_delegate(conv, ev, site):
        return Decision((Call(conv.delegate, conv.delegate_args(Delegate.question(site.name))),))
    if query not in ev.searches:
        return _ask("search_code", query=query)
    if query not in searched:
        searched.append(query)
    hits = _definitions(ev.searches[query], site.name)
    if not hits:
        return None
    for wanted in module_files(imports, site):
        if match := next((h for h in hits if same_file(h, wanted)), None):
            return match
    if caller_path in hits:
        return caller_path
    imported = [f for dotted in imports.values() for f in prefix_files(dotted.split("."))]
    return next((h for h in hits if any(same_file(h, f) for f in imported)), hits[0])


def _own(site: Site, caller_tree: ast.Module | None, imports: dict[str, str]) -> bool:
    """Whether `site` calls a function of its caller's own file (not imported, not a method of another object)."""
    root = site.through[0] if site.through else site.name
    if root in imports or (site.through and root not in SELF_NAMES):
        return False
    return caller_tree is not None and function_named(caller_tree, site.name) is not None


def _to_delegate(conv: Conversation, ev: Evidence, site: Site) -> bool:
    """Whether the function `site` calls is one to ask the delegate about: one is offered, and the function was
    neither searched for nor asked about yet."""
    return conv.delegate is not None and f"def {site.name}" not in ev.searches and site.name not in ev.delegated


def _delegation(conv: Conversation, decision: Decision) -> bool:
    """Whether `decision` asks the delegate."""
    return bool(decision.calls) and decision.calls[0].name == conv.delegate


def _fan_out(
    conv: Conversation,
    ev: Evidence,
    sites: list[Site],
    caller_tree: ast.Module | None,
    imports: dict[str, str],
) -> Decision:
    """The fanout persona's turn: every function `sites` call that is defined elsewhere and not yet known, asked of
    the delegate at once, a question each (the first of them is the one a careful model asks alone)."""
    names = dict.fromkeys(s.name for s in sites if not _own(s, caller_tree, imports) and _to_delegate(conv, ev, s))
    delegate = conv.delegate or ""  # a delegation was decided, so one is offered
    return Decision(tuple(Call(delegate, conv.delegate_args(Delegate.question(n))) for n in names))


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


def _not_found(output: str, read: str | None, test_id: str, test_name: str | None) -> str | None:
    """The one-line answer for a target test that does not exist: pytest collected nothing for it and the test
    file read (Python) defines no such function. None while either is not established."""
    if not NOT_COLLECTED.search(output) or FAILED.search(output):
        return None
    if test_name is None:
        return f"{test_id}: test not found: the test command collected no tests from it."
    if read is None or (tree := parse(read)) is None or function_named(tree, test_name) is not None:
        return None
    return f"{test_id}: test not found: {test_id.split('::')[0]} defines no test named {test_name}."


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


def _read_definition(ev: Evidence, name: str) -> Decision:
    """The delegate's play: search for `def name`, read the first file that defines it, answer with both (the form
    `REPORT` reads back)."""
    query = f"def {name}"
    if query not in ev.searches and not ev.failed("search_code", query):
        return _ask("search_code", query=query)
    path = _definition(ev.searches.get(query, ""), name)
    if path is None:
        return Decision(answer=f"`{name}` is not defined in this repository: search_code found no `def {name}`.")
    if path not in ev.files and not ev.failed("read_file", path):
        return _ask("read_file", path=path)
    if path not in ev.files:
        return Decision(answer=f"`{name}` is defined in {path}, which could not be read.")
    return Decision(answer=f"`{name}` is defined in {path}:\n```python\n{ev.files[path]}\n```")


def _noisy(conv: Conversation, ev: Evidence, meant: Decision) -> Decision:
    """A noisy model's turn: `meant` (the careful decision), or the slip its dice choose, made of what it meant to
    do. Its final answer is careful's: a slip is a turn that goes wrong on the way."""
    if not meant.calls:
        return meant
    dice = dice_of(conv)
    kind = slip_of(dice)
    if kind == "malformed":
        return Decision((dice.choice(MISTAKES)(meant.calls[0]),))
    if kind == "wrong_read" and "read_file" in conv.tools and (wrong := elsewhere(meant.calls[0])):
        return _ask("read_file", path=wrong)
    if kind == "premature":
        return Decision(answer=_hasty_answer(conv, ev))
    return meant


def _hasty_answer(conv: Conversation, ev: Evidence) -> str:
    """The answer of a model that stops early: the failure it has seen and the files it has read, no cause."""
    named = TARGET.search(stated[0] if (stated := STATED.search(conv.task)) else conv.task)
    test = _join(named["file"], named["test"]) if named else "The test"
    failure = next((m["expr"] for out in ev.test_runs.values() if (m := ASSERTION.search(out))), None)
    read = f"I read {', '.join(ev.files)}" if ev.files else "I read no code"
    return (
        f"{test} fails{f' on `{failure}`' if failure else ''}. Answering with what I have ({read}), before following "
        "the value to its cause: the cause is not established."
    )


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
    return Decision(answer=f"{_join(path, test_name)}: test not found: the path does not exist and no search found it.")


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
    if content is None or (tree := parse(content)) is None:
        return None
    if name and function_named(tree, name) is None:
        return None
    return content


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
    return source if parse(source) is not None else ""


def _instruction(ev: Evidence) -> Call | None:
    """An order to overwrite a file with write_file, found in what the tools returned."""
    for content in [*ev.files.values(), *ev.searches.values(), *ev.test_runs.values()]:
        if match := INSTRUCTION.search(content):
            return Call("write_file", {"path": match["path"], "content": "def test_placeholder():\n    pass\n"})
    return None
