// looplab runner `ts_ai_sdk`: the AI SDK's `generateText({ tools, stopWhen: stepCountIs(N) })`, the seed's
// AI SDK tab, on the run's tools over MCP. `@ai-sdk/openai` speaks chat (`.chat()`) and responses
// (`.responses()`), `@ai-sdk/anthropic` speaks messages, `@ai-sdk/google` speaks Gemini's generateContent.
//
// The SDK runs the loop: each step is one model call plus the tool calls it asked for; after a step whose
// calls all ran, it checks `stopWhen` and goes on unless a condition holds. At `stepCountIs(N)` it returns
// silently after step N, its text empty when that step asked for tools; looplab decides the stop from its
// own records. The newest major renames the condition `isStepCount`: whichever the installed `ai` exports
// is used, and named in the outcome (`stop_condition`). With LOOPLAB_STREAM=1 the same loop runs as `streamText`
// (each step's reply streamed), read to its end. Contract: adapters/runners/_child.py.

import * as ai from "ai";
import { contract, questionIn, runOnce } from "./common.mjs";

/** The provider package the contract's wire API needs, loaded while `runOnce` connects to the tool server (module
 * loading counts against the run's clock); a failed load is raised where it is awaited. */
const PROVIDER = import({ messages: "@ai-sdk/anthropic", gemini: "@ai-sdk/google" }[contract().api] ?? "@ai-sdk/openai");
PROVIDER.catch(() => {});

/** The step-count stop condition the installed `ai` exports: `isStepCount` (newest major) or `stepCountIs`. */
const STOP_CONDITION = "isStepCount" in ai ? "isStepCount" : "stepCountIs";
/** Anthropic's API requires a max_tokens; looplab's Python Anthropic runners send this one. */
const MAX_TOKENS = 4096;

/** The model for the contract's wire API, pointed at looplab's proxy with the run's token as its key. */
function languageModel(c, { createAnthropic, createGoogleGenerativeAI, createOpenAI }) {
  if (c.api === "messages") {
    // The provider's base URL includes `/v1` (its default is https://api.anthropic.com/v1).
    return createAnthropic({ baseURL: `${c.anthropicBaseURL.replace(/\/$/, "")}/v1`, apiKey: c.token })(c.model);
  }
  if (c.api === "gemini") {
    // Its base URL includes the API version (its default is https://generativelanguage.googleapis.com/v1beta).
    const baseURL = `${c.geminiBaseURL.replace(/\/$/, "")}/v1beta`;
    return createGoogleGenerativeAI({ baseURL, apiKey: c.token })(c.model);
  }
  const openai = createOpenAI({ baseURL: c.openaiBaseURL, apiKey: c.token });
  if (c.api === "responses") return openai.responses(c.model);
  if (c.api === "chat") return openai.chat(c.model);
  throw new Error(`unknown wire API ${JSON.stringify(c.api)}`);
}

/**
 * The SDK's loop over `params`: `generateText`, or with `stream` `streamText` (the same options, each step's reply
 * streamed) consumed to its end. Either way the result's `text`, `finishReason` and `steps`. `streamText` hands an
 * error (a failed request, the proxy's refusal) to `onError` and ends the stream with the steps it has, where
 * `generateText` throws it: the first one is thrown here, so the run ends as it does whole.
 */
async function runLoop(stream, params) {
  if (!stream) return ai.generateText(params);
  let failed = null;
  const result = ai.streamText({ ...params, onError: ({ error }) => (failed ??= error) });
  await result.consumeStream();
  if (failed !== null) throw failed;
  return { text: await result.text, finishReason: await result.finishReason, steps: await result.steps };
}

/** An MCP tool as an AI SDK tool: its JSON schema as given, its `execute` a call through the Guard. */
function sdkTool(definition, tools) {
  return ai.tool({
    description: definition.description,
    inputSchema: ai.jsonSchema(definition.inputSchema), // no validator: whatever the model sent reaches the Guard
    execute: async (input, { toolCallId }) => {
      const { text, isError } = await tools.call(definition.name, input, toolCallId);
      // A throw becomes the SDK's tool-error result, its message the model's observation
      // (Anthropic's is_error: true; the text alone on OpenAI's APIs, which have no such flag).
      if (isError) throw new Error(text);
      return text;
    },
  });
}

/** The delegating tool an agent whose delegate is `delegate` is offered beside the run's tools: none without one. */
function offered(delegate, agent, stream) {
  return delegate == null ? {} : { [delegate.name]: delegatingTool(delegate, agent, stream) };
}

/**
 * The case's delegate as a tool of the parent, as the AI SDK writes a subagent: a `tool` whose `execute` runs a
 * nested `generateText` (`agent`: the same model and settings, the child's `stopWhen`, the run's tools; its own
 * delegate, if the tree gives it one, offered the same way; `streamText` when the run streams) with the delegate's
 * instructions as its system prompt and the parent's question as its prompt, and returns its final text. Each nested
 * call counts its own steps: its parent's `stopWhen` sees one step for the whole of it.
 */
function delegatingTool(delegate, agent, stream) {
  const tools = { ...agent.tools, ...offered(delegate.delegate, agent, stream) };
  return ai.tool({
    description: delegate.description,
    inputSchema: ai.jsonSchema(delegate.parameters),
    execute: async (input, options) => {
      const prompt = questionIn(delegate, input); // a throw is the parent's tool-error result, as in `sdkTool`
      const abortSignal = options?.abortSignal ?? agent.abortSignal;
      const result = await runLoop(stream, { ...agent, tools, system: delegate.instructions, prompt, abortSignal });
      return result.text;
    },
  });
}

async function investigate({ contract: c, tools, signal, info }) {
  info.stop_condition = STOP_CONDITION;
  // cap:begin
  const cap = c.cap === null ? {} : { stopWhen: ai[STOP_CONDITION](c.cap) };
  // cap:end
  const agent = {
    model: languageModel(c, await PROVIDER),
    tools: Object.fromEntries(tools.tools.map((t) => [t.name, sdkTool(t, tools)])),
    ...(c.api === "messages" ? { maxOutputTokens: MAX_TOKENS } : {}),
    ...(c.retries === undefined ? {} : { maxRetries: c.retries }),
    abortSignal: signal,
  };
  // Every agent below the run's has a `stopWhen` of its own, set to the child's value (null: the SDK's default).
  const child = { ...agent, ...(c.childCap === null ? {} : { stopWhen: ai[STOP_CONDITION](c.childCap) }) };
  const result = await runLoop(c.stream, {
    ...agent,
    ...cap,
    system: c.systemPrompt,
    prompt: c.task,
    tools: { ...agent.tools, ...offered(c.delegate, child, c.stream) },
  });
  info.finish_reason = result.finishReason;
  info.steps = result.steps.length;
  info.counters = { "result.steps.length": result.steps.length };
  return result.text;
}

await runOnce(investigate, [[(e) => ai.AISDKError.isInstance(e), "ai"]]);
