// looplab runner `ts_anthropic_tool_runner`: the Anthropic TypeScript SDK's
// `client.beta.messages.toolRunner({ max_iterations })`, the seed's TypeScript tab, on the run's tools over MCP.
//
// The SDK runs the loop: it sends a request, runs the reply's tool calls, sends the results back, until a
// reply asks for no tool or `max_iterations` requests have been made. At that cap it stops silently and
// resolves to its last reply, which still has `stop_reason: "tool_use"`; looplab decides the stop from its
// own records. Messages API only. Contract: adapters/runners/_child.py.

import Anthropic from "@anthropic-ai/sdk";
import { mcpTool } from "@anthropic-ai/sdk/helpers/beta/mcp";
import { ToolError } from "@anthropic-ai/sdk/lib/tools/ToolError";
import { runOnce } from "./common.mjs";

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
  const runner = client.beta.messages.toolRunner(
    {
      model: c.model,
      max_tokens: MAX_TOKENS,
      system: c.systemPrompt,
      messages: [{ role: "user", content: c.task }],
      tools: tools.tools.map((t) => runnable(t, tools)),
      thread: false, // the whole history each turn: the scripted model and local servers keep no thread
      ...cap,
    },
    { signal },
  );
  const message = await runner; // runUntilDone(): the last reply, at an answer or at the cap
  info.stop_reason = message.stop_reason;
  return message.content
    .filter((block) => block.type === "text")
    .map((block) => block.text)
    .join("");
}

await runOnce(investigate, [[(e) => e instanceof Anthropic.AnthropicError, "@anthropic-ai/sdk"]]);
