// looplab runner `ts_openai_agents`: the OpenAI Agents SDK for TypeScript, an `Agent` driven by
// `run(agent, task, { maxTurns })`, on the run's tools over MCP. Its OpenAI models speak responses
// (`OpenAIResponsesModel`, the SDK's default) and chat (`OpenAIChatCompletionsModel`).
//
// The SDK runs the loop: each turn is one model call plus the tool calls it asked for. Before a turn it checks
// the turn count, so `maxTurns: N` makes N model calls and, when the Nth still asked for tools, throws
// `MaxTurnsExceededError` before an (N+1)th; the error carries the run's state (`error.state`, its history).
// `errorHandlers: { maxTurns }` turns that throw into a final output instead. With LOOPLAB_STREAM=1 the run is
// `run(agent, task, { stream: true })` (each turn's reply streamed), its events read to the end and its completion
// awaited. Contract: adapters/runners/_child.py.

import { runOnce } from "./common.mjs";

// Module loading counts against the run's clock, so: the two packages `@openai/agents` re-exports, not the umbrella
// (which also loads the realtime package this loop does not use); and loaded while `runOnce` connects to the tool
// server, awaited in the run. A failed load is raised where it is awaited, not as an unhandled rejection here.
const SDK = Promise.all([import("@openai/agents-core"), import("@openai/agents-openai"), import("openai")]);
SDK.catch(() => {});
/** The SDK's modules once loaded: naming an error needs their classes. */
let sdk = null;

/** The knob `max_steps` maps to; the other one (`errorHandlers`) is the graceful alternative `looplab caps` measures. */
const MAX_TURNS = "run(agent, task, { maxTurns })";
/** What the `maxTurns` error handler answers with, as looplab's Python twin does. */
const STOPPED = "(stopped: maxTurns reached)";

/** The model for the contract's wire API, on an OpenAI client pointed at looplab's proxy with the run's token. */
function agentModel(c) {
  const { OpenAI, OpenAIChatCompletionsModel, OpenAIResponsesModel } = sdk;
  const client = new OpenAI({
    apiKey: c.token,
    baseURL: c.openaiBaseURL,
    maxRetries: c.retries,
    timeout: c.maxSeconds * 1000,
  });
  if (c.api === "responses") return new OpenAIResponsesModel(client, c.model);
  if (c.api === "chat") return new OpenAIChatCompletionsModel(client, c.model);
  throw new Error(`this runner speaks the responses and chat APIs, not ${JSON.stringify(c.api)}`);
}

/** An MCP tool as an Agents SDK function tool: its JSON schema as given (not strict), its body a call to the Guard. */
function agentTool(definition, tools) {
  return sdk.tool({
    name: definition.name,
    description: definition.description ?? "",
    parameters: definition.inputSchema,
    strict: false, // strict mode would rewrite the schema (every field required); keep it as given
    // Neither OpenAI API has an is_error field: the Guard's text says it.
    execute: async (input, _context, details) => (await tools.call(definition.name, input, details?.toolCall?.callId)).text,
  });
}

/** The delegating tool an agent whose delegate is `delegate` is offered beside the run's tools: none without one. */
function offered(delegate, model, runTools, maxTurns, stream) {
  return delegate == null ? [] : [delegatingTool(delegate, model, runTools, maxTurns, stream)];
}

/**
 * The case's delegate as a tool of the parent, in the SDK's idiom (agents as tools, `agent.asTool`): an `Agent` with
 * the same model, the run's tools and its own delegate as a tool the same way, if the tree gives it one (never this
 * tool), run by a nested `Runner.run` with the parent's question as its input (`{ input }`, the SDK's own schema) and
 * its final output the tool's result. Each nested run counts its own turns, up to `maxTurns` (null: the SDK's
 * `DEFAULT_MAX_TURNS`); its parent's `maxTurns` does not count them. With `stream`, an `onStream` handler: the SDK
 * then runs the nested agent streamed (and drains it itself).
 */
function delegatingTool(delegate, model, runTools, maxTurns, stream) {
  const tools = [...runTools, ...offered(delegate.delegate, model, runTools, maxTurns, stream)];
  const child = new sdk.Agent({ name: delegate.name, instructions: delegate.instructions, model, tools });
  const runOptions = maxTurns === null ? {} : { maxTurns };
  const streamed = stream ? { onStream: () => {} } : {};
  return child.asTool({ toolName: delegate.name, toolDescription: delegate.description, runOptions, ...streamed });
}

/**
 * A streamed run's result once the run is over: its events read to the end (the stream throws what the run threw)
 * and its completion awaited; a run its signal cancelled (the stream then just closes) throws the abort, as whole.
 */
async function finished(result, signal) {
  for await (const _event of result) {
    // each event is the run's; the result gathers what it needs from them
  }
  await result.completed;
  signal.throwIfAborted();
  return result;
}

async function investigate({ contract: c, tools, signal, info }) {
  const [core, models, openai] = await SDK;
  sdk = { ...core, ...models, OpenAI: openai.default };
  const { Agent, MaxTurnsExceededError, run, setTracingDisabled } = sdk;
  setTracingDisabled(true); // looplab records at its own boundaries; the exporter would post to OpenAI
  const model = agentModel(c);
  const runTools = tools.tools.map((t) => agentTool(t, tools));
  // cap:begin
  const cap = c.cap === null ? {} : { maxTurns: c.cap };
  if (c.capKnob !== MAX_TURNS) cap.errorHandlers = { maxTurns: () => ({ finalOutput: STOPPED }) };
  // cap:end
  const agent = new Agent({
    name: "looplab",
    instructions: c.systemPrompt,
    model,
    // The tool (if any) whose result ends the run as its final output.
    ...(c.endingTool === null ? {} : { toolUseBehavior: { stopAtToolNames: [c.endingTool] } }),
    // Every agent below the run's counts its own turns, up to the child's value (null: the SDK's default).
    tools: [...runTools, ...offered(c.delegate, model, runTools, c.childCap, c.stream)],
  });
  let streamed = null;
  try {
    const result = c.stream
      ? await finished((streamed = await run(agent, c.task, { signal, ...cap, stream: true })), signal)
      : await run(agent, c.task, { signal, ...cap });
    info.history_items = result.history.length;
    info.counters = counters(result.state, streamed);
    return result.finalOutput == null ? null : String(result.finalOutput);
  } catch (error) {
    if (error instanceof MaxTurnsExceededError && error.state) {
      // Where the partial history is: on the error, as the run's state.
      info.history = "MaxTurnsExceededError.state";
      info.history_items = error.state.history.length;
    }
    info.counters = counters(streamed?.state ?? error?.state, streamed);
    throw error;
  }
}

/**
 * The SDK's own counts as the run left them, by where a user reads each: the requests in the run state's usage
 * (the result's, or the error's) and, streamed, the result's `currentTurn`.
 */
function counters(state, streamed) {
  const out = {};
  if (Number.isInteger(state?.usage?.requests)) out["state.usage.requests"] = state.usage.requests;
  if (streamed !== null && Number.isInteger(streamed.currentTurn)) {
    out["StreamedRunResult.currentTurn"] = streamed.currentTurn;
  }
  return out;
}

await runOnce(investigate, [
  [(e) => sdk !== null && e instanceof sdk.AgentsError, "@openai/agents"],
  [(e) => sdk !== null && e instanceof sdk.OpenAI.OpenAIError, "openai"],
]);
