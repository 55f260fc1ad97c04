// What looplab reads from the installed packages rather than hard-coding: each knob's default, and the
// name of the AI SDK's step-count stop condition. Prints one JSON object; sends nothing anywhere.

import { dirname, join } from "node:path";
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";
import Anthropic from "@anthropic-ai/sdk";
import { END, MessagesAnnotation, START, StateGraph } from "@langchain/langgraph";
import * as ai from "ai";

/** `generateText`'s default `stopWhen`, from its own parameter list (`stopWhen = stepCountIs(1)` in ai 5 and 6). */
function stopWhenDefault() {
  const match = /\bstopWhen\s*=\s*(\w+)\(\s*(\d+)\s*\)/.exec(String(ai.generateText));
  if (!match) return { value: null, source: null };
  return { value: Number(match[2]), source: `ai generateText({ stopWhen = ${match[1]}(${match[2]}) })` };
}

/** `toolRunner`'s `max_iterations` when none is given, as the runner built without one holds it (unset: no cap). */
function maxIterationsDefault() {
  const client = new Anthropic({ apiKey: "unused", openTelemetry: false });
  const runner = client.beta.messages.toolRunner({ model: "unused", max_tokens: 1, messages: [], thread: false });
  const value = runner.params.max_iterations;
  return {
    value: Number.isInteger(value) ? value : null,
    source: `@anthropic-ai/sdk toolRunner(...).params.max_iterations with none given: ${value === undefined ? "unset (no cap)" : value}`,
  };
}

/** `run`'s `maxTurns` when none is given: `DEFAULT_MAX_TURNS` in `@openai/agents-core` (its root does not export it). */
async function maxTurnsDefault() {
  // Resolved from `@openai/agents`, whose dependency it is: its dist folder.
  const agents = createRequire(import.meta.url).resolve("@openai/agents");
  const core = dirname(createRequire(agents).resolve("@openai/agents-core"));
  const where = "@openai/agents-core/dist/runner/constants.mjs";
  try {
    const { DEFAULT_MAX_TURNS: value } = await import(pathToFileURL(join(core, "runner", "constants.mjs")).href);
    return { value: Number.isInteger(value) ? value : null, source: `${where} DEFAULT_MAX_TURNS` };
  } catch {
    return { value: null, source: null };
  }
}

/** The `recursionLimit` a graph invoked without one runs under, as its node sees it in its config. */
async function recursionLimitDefault() {
  const graph = new StateGraph(MessagesAnnotation)
    .addNode("read", (_state, config) => ({ messages: [{ role: "ai", content: String(config.recursionLimit) }] }))
    .addEdge(START, "read")
    .addEdge("read", END)
    .compile();
  const { messages } = await graph.invoke({ messages: [] });
  const value = Number.parseInt(String(messages.at(-1)?.content), 10);
  return {
    value: Number.isInteger(value) ? value : null,
    source: "@langchain/langgraph graph.invoke(input) with no config: config.recursionLimit in a node",
  };
}

const stopCondition = "isStepCount" in ai ? "isStepCount" : "stepCountIs";
process.stdout.write(
  JSON.stringify({
    stop_condition: stopCondition,
    defaults: {
      stop_when: stopWhenDefault(),
      max_iterations: maxIterationsDefault(),
      max_turns: await maxTurnsDefault(),
      recursion_limit: await recursionLimitDefault(),
    },
  }) + "\n",
);
