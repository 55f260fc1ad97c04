// looplab runner `ts_anthropic_tool_runner`: the Anthropic TypeScript SDK's
// `client.beta.messages.toolRunner({ max_iterations })`, the seed's TypeScript tab, on the run's tools over MCP.
//
// The SDK runs the loop: it sends a request, runs the reply's tool calls, sends the results back, until a
// reply asks for no tool or `max_iterations` requests have been made. At that cap it stops silently and
// resolves to its last reply, which still has `stop_reason: "tool_use"`; looplab decides the stop from its
// own records. With LOOPLAB_STREAM=1 it runs with `stream: true` (each request streamed; `await runner` reads each
// stream to its final message). Messages API only. Contract: adapters/runners/_child.py.

import Anthropic from "@anthropic-ai/sdk";
import { betaTool } from "@anthropic-ai/sdk/helpers/beta/json-schema";
import { mcpTool } from "@anthropic-ai/sdk/helpers/beta/mcp";
import { ToolError } from "@anthropic-ai/sdk/lib/tools/ToolError";
import { questionIn, runOnce } from "./common.mjs";

const MAX_TOKENS = 4096; // as looplab's Python tool runner

/** An MCP tool as a runnable tool: the SDK's own conversion, its `run` passing the `tool_use` id to the Guard. */
function runnable(definition, tools) {
  return {
    ...mcpTool(definition, tools.client),
    run: async (input, context) => {
      const { text, isError } = await tools.call(definition.name, input, context?.toolUse?.id);
      if (isError) throw new ToolError(text); // the runner sends it as a tool_result with is_error: true
      return text;
    },
  };
}

async function investigate({ contract: c, tools, signal, info }) {
  if (c.api !== "messages") throw new Error(`this runner speaks the messages API only, not ${c.api}`);
  const client = new Anthropic({
    apiKey: c.token,
    baseURL: c.anthropicBaseURL,
    maxRetries: c.retries,
    timeout: c.maxSeconds * 1000,
    openTelemetry: false, // looplab records at its own boundaries
  });
  // cap:begin
  const cap = c.cap === null ? {} : { max_iterations: c.cap };
  // cap:end
  const agent = {
    model: c.model,
    max_tokens: MAX_TOKENS,
    tools: tools.tools.map((t) => runnable(t, tools)),
    thread: false, // the whole history each turn: the scripted model and local servers keep no thread
    stream: c.stream, // each request streamed, the tools run once its reply is whole (no `runToolsEagerly`)
  };
  // Every agent below the run's has a `max_iterations` of its own, set to the child's value (null: the SDK's default).
  const child = { ...agent, ...(c.childCap === null ? {} : { max_iterations: c.childCap }) };
  const runner = client.beta.messages.toolRunner(
    {
      ...agent,
      ...cap,
      system: c.systemPrompt,
      messages: [{ role: "user", content: c.task }],
      tools: [...agent.tools, ...offered(c.delegate, client, child)],
    },
    { signal },
  );
  const message = await runner; // runUntilDone(): the last reply, at an answer or at the cap
  info.stop_reason = message.stop_reason;
  return text(message);
}

/** The delegating tool an agent whose delegate is `delegate` is offered beside the run's tools: none without one. */
function offered(delegate, client, agent) {
  return delegate == null ? [] : [delegatingTool(delegate, client, agent)];
}

/**
 * The case's delegate as a tool of the parent: a runnable tool (`betaTool`) whose `run` runs a nested `toolRunner`
 * (`agent`: the same client, model and run's tools, and the child's `max_iterations`; its own delegate, if the tree
 * gives it one, offered the same way) with the delegate's instructions as its system prompt and the parent's question
 * as its one user message, and returns the text of its last reply. Each nested runner counts its own iterations: its
 * parent's `max_iterations` sees one request for the whole of it.
 */
function delegatingTool(delegate, client, agent) {
  const tools = [...agent.tools, ...offered(delegate.delegate, client, agent)];
  return betaTool({
    name: delegate.name,
    description: delegate.description,
    inputSchema: delegate.parameters,
    run: async (input, context) => {
      const question = questionIn(delegate, input); // a throw: a tool_result with is_error, as a tool's ToolError
      const messages = [{ role: "user", content: question }];
      const params = { ...agent, tools, system: delegate.instructions, messages };
      return text(await client.beta.messages.toolRunner(params, { signal: context?.signal }));
    },
  });
}

/** A reply's text blocks, joined. */
function text(message) {
  return message.content
    .filter((block) => block.type === "text")
    .map((block) => block.text)
    .join("");
}

await runOnce(investigate, [[(e) => e instanceof Anthropic.AnthropicError, "@anthropic-ai/sdk"]]);
