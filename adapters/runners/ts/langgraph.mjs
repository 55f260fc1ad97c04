// looplab runner `ts_langgraph`: a hand-built LangGraph.js `StateGraph` (a model node, the prebuilt `ToolNode`, a
// step counter in the state), as looplab's Python `langgraph` runner builds it, on the run's tools over MCP.
// `@langchain/openai`'s `ChatOpenAI` speaks chat and (`useResponsesApi`) responses, `@langchain/anthropic`'s
// `ChatAnthropic` speaks messages, `@langchain/google-genai`'s `ChatGoogleGenerativeAI` speaks Gemini's API.
//
// The model node counts its calls; the edge after it ends the graph when the model answered, or when the counter
// reached the cap while the model still wants tools. `recursionLimit` counts the graph's super-steps (a model step
// and a tools step per call) and stays as a backstop the counter always reaches first; set on its own (the second
// knob) the graph throws `GraphRecursionError` at it. With LOOPLAB_STREAM=1 the graph runs as `graph.stream` in
// LangGraph's `messages` mode, which has each model call stream its reply. Contract: adapters/runners/_child.py.

import { contract, questionIn, runOnce } from "./common.mjs";

// Module loading counts against the run's clock, so the packages load while `runOnce` connects to the tool server
// and are awaited in the run; of the provider packages, only the one the wire API needs. A failed load is raised
// where it is awaited, not as an unhandled rejection here.
const LOADING = Promise.all([
  import("@langchain/core/messages"),
  import("@langchain/core/tools"),
  import("@langchain/langgraph"),
  import("@langchain/langgraph/prebuilt"),
  import("@langchain/core/utils/async_caller"),
  import({ messages: "@langchain/anthropic", gemini: "@langchain/google-genai" }[contract().api] ?? "@langchain/openai"),
]);
LOADING.catch(() => {});
/** The packages' exports once loaded: naming an error needs their classes. */
let lc = null;

/** The knob `max_steps` maps to; `RECURSION` is the graph's own limit, the other knob `looplab caps` measures. */
const COUNTER = "state step counter";
const RECURSION = "recursionLimit";
const MAX_TOKENS = 4096; // Anthropic's API requires one; looplab's Python Anthropic runners send this one

/** The graph's state: the conversation, and how many model calls were made. */
function agentState({ Annotation, MessagesAnnotation }) {
  return Annotation.Root({
    ...MessagesAnnotation.spec,
    steps: Annotation({ reducer: (_, next) => next, default: () => 0 }),
  });
}

/** A `recursionLimit` the step counter always reaches first: a model and a tools super-step per call. */
function recursionBackstop(modelCalls) {
  return 2 * modelCalls + 10;
}

/** The chat model for the contract's wire API, pointed at looplab's proxy with the run's token as its key. */
function chatModel(c) {
  const retries = c.retries === undefined ? {} : { maxRetries: c.retries };
  // A streamed reply with its usage (each class's default; on Chat Completions, `stream_options.include_usage`).
  const usage = { streamUsage: true };
  if (c.api === "messages") {
    return new lc.ChatAnthropic({
      model: c.model,
      apiKey: c.token,
      anthropicApiUrl: c.anthropicBaseURL,
      maxTokens: MAX_TOKENS,
      ...retries,
      ...usage,
    });
  }
  if (c.api === "gemini") {
    // `@google/generative-ai` adds the API version (`/v1beta`) to the base URL and sends the key as x-goog-api-key.
    // It retries nothing itself: LangChain's caller does, and gives up at once on a 429 without a Retry-After,
    // which the provider SDKs (and so the other wire APIs here) retry like a 5xx.
    const giveUpOn = new lc.AsyncCaller({}).onFailedAttempt;
    const onFailedAttempt = (error) => (error?.status === 429 ? undefined : giveUpOn(error));
    return new lc.ChatGoogleGenerativeAI({
      model: c.model,
      apiKey: c.token,
      baseUrl: c.geminiBaseURL,
      ...retries,
      ...usage,
      onFailedAttempt,
    });
  }
  if (c.api !== "chat" && c.api !== "responses") throw new Error(`unknown wire API ${JSON.stringify(c.api)}`);
  return new lc.ChatOpenAI({
    model: c.model,
    apiKey: c.token,
    configuration: { baseURL: c.openaiBaseURL },
    useResponsesApi: c.api === "responses",
    ...retries,
    ...usage,
  });
}

/** An MCP tool as a LangChain tool: its JSON schema as given, each call to the Guard with the model's call id. */
function graphTool(definition, tools) {
  return new lc.DynamicStructuredTool({
    name: definition.name,
    description: definition.description ?? "",
    schema: definition.inputSchema,
    func: async (input, _runManager, config) => {
      const callId = config?.toolCall?.id;
      const { text, isError } = await tools.call(definition.name, input, callId);
      // A ToolMessage is passed on as it is: a failed call keeps the Guard's text, marked as an error
      // (Anthropic's is_error: true; the text alone on OpenAI's APIs, which have no such flag).
      return new lc.ToolMessage({
        content: text,
        tool_call_id: callId,
        name: definition.name,
        status: isError ? "error" : "success",
      });
    },
  });
}

/** model -> (tools -> model)* -> END, ending after `maxSteps` model calls at most (null: no counter). */
function buildGraph(model, tools, systemPrompt, maxSteps) {
  const { END, START, StateGraph, ToolNode } = lc;
  const bound = model.bindTools(tools);
  const callModel = async (state, config) => {
    const reply = await bound.invoke([{ role: "system", content: systemPrompt }, ...state.messages], config);
    return { messages: [reply], steps: state.steps + 1 };
  };
  const route = (state) => {
    const wantsTools = (state.messages.at(-1)?.tool_calls ?? []).length > 0;
    // cap:begin
    return wantsTools && (maxSteps === null || state.steps < maxSteps) ? "tools" : END;
    // cap:end
  };
  return new StateGraph(agentState(lc))
    .addNode("model", callModel)
    .addNode("tools", new ToolNode(tools, { handleToolErrors: true })) // a tool that throws is an observation
    .addEdge(START, "model")
    .addConditionalEdges("model", route, ["tools", END])
    .addEdge("tools", "model")
    .compile();
}

/**
 * Run `graph` on `input` to its end and return its final state: `invoke`, or with `stream` `graph.stream` in the
 * `messages` mode (beside `values`, whose last chunk is the final state `invoke` returns). LangGraph's `messages` mode
 * hands the run a callback handler that prefers streaming, and a chat model's `invoke` under one streams its reply
 * (`_streamResponseChunks`) and joins the chunks. (The chat model's own `streaming: true` does too, but `ChatOpenAI`
 * then estimates the reply's tokens with an encoding it fetches from tiktoken.pages.dev, which stalls offline.)
 */
async function runGraph(graph, input, config, stream) {
  if (!stream) return graph.invoke(input, config);
  let state;
  for await (const [mode, chunk] of await graph.stream(input, { ...config, streamMode: ["values", "messages"] })) {
    if (mode === "values") state = chunk;
  }
  return state;
}

/** The delegating tool an agent whose delegate is `delegate` is offered beside the run's tools: none without one. */
function offered(delegate, model, runTools, counter, config, stream) {
  return delegate == null ? [] : [delegatingTool(delegate, model, runTools, counter, config, stream)];
}

/**
 * The case's delegate as a tool of the parent, in LangChain's "subagents as tools" idiom: one string argument,
 * `question`; the body runs the delegate's own graph (the same model, step `counter` and `config`, the run's tools and
 * its own delegate as a tool the same way, if the tree gives it one) in an `invoke` of its own (`config` with the
 * run's signal; the tool call's own signal first, where Pregel gives one), with the question as its one user message
 * and a step counter of its own (streamed as the parent is), and returns the text of its final message. No native cap
 * of its parent counts its calls: its counter and super-steps start afresh.
 */
function delegatingTool(delegate, model, runTools, counter, config, stream) {
  const tools = [...runTools, ...offered(delegate.delegate, model, runTools, counter, config, stream)];
  const child = buildGraph(model, tools, delegate.instructions, counter);
  return new lc.DynamicStructuredTool({
    name: delegate.name,
    description: delegate.description,
    schema: delegate.parameters,
    func: async (input, _runManager, toolConfig) => {
      const messages = [{ role: "user", content: questionIn(delegate, input) }]; // a throw: ToolNode's observation
      const signal = toolConfig?.signal ?? config.signal;
      const state = await runGraph(child, { messages, steps: 0 }, { ...config, signal }, stream);
      const last = state.messages.at(-1);
      return typeof last?.text === "string" ? last.text : "";
    },
  });
}

async function investigate({ contract: c, tools, signal, info }) {
  lc = Object.assign({}, ...(await LOADING));
  const counter = c.capKnob === COUNTER ? c.cap : null;
  const model = chatModel(c);
  const runTools = tools.tools.map((t) => graphTool(t, tools));
  // cap:begin
  let config = {};
  if (c.cap !== null) config = { recursionLimit: c.capKnob === RECURSION ? c.cap : recursionBackstop(c.cap) };
  // cap:end
  // Every agent below the run's has a counter and a `recursionLimit` of its own, from the child's value (null:
  // no counter, and LangGraph's default limit).
  const childCounter = c.capKnob === COUNTER ? c.childCap : null;
  let childConfig = {};
  if (c.childCap !== null) {
    childConfig = { recursionLimit: c.capKnob === RECURSION ? c.childCap : recursionBackstop(c.childCap) };
  }
  const offeredTools = offered(c.delegate, model, runTools, childCounter, { ...childConfig, signal }, c.stream);
  const graph = buildGraph(model, [...runTools, ...offeredTools], c.systemPrompt, counter);
  const input = { messages: [{ role: "user", content: c.task }], steps: 0 };
  const state = await runGraph(graph, input, { ...config, signal }, c.stream);
  info.steps = state.steps;
  const last = state.messages.at(-1);
  if ((last?.tool_calls ?? []).length > 0) return null; // the counter ended the graph: the model did not answer
  // A reply whose only tool calls LangChain could not parse ends the graph too (`route` reads `tool_calls`).
  const invalid = last?.invalid_tool_calls ?? [];
  if (invalid.length > 0) info.invalid_tool_calls = invalid.map(({ name, args, error }) => ({ name, args, error }));
  return typeof last?.text === "string" ? last.text : null;
}

/**
 * Whether `error` is of a class named `name` or derived from one. By name, as the provider SDKs are loaded only for
 * the API in use, and `@langchain/anthropic` brings its own copy of the Anthropic SDK, whose classes are not the
 * ones an import here would get.
 */
function isA(name) {
  return (error) => {
    for (let p = error == null ? null : Object.getPrototypeOf(error); p; p = Object.getPrototypeOf(p)) {
      if (p.constructor?.name === name) return true;
    }
    return false;
  };
}

await runOnce(investigate, [
  [(e) => lc !== null && e instanceof lc.BaseLangGraphError, "@langchain/langgraph"],
  [isA("OpenAIError"), "openai"],
  [isA("AnthropicError"), "@anthropic-ai/sdk"],
  [isA("GoogleGenerativeAIError"), "@google/generative-ai"],
]);
