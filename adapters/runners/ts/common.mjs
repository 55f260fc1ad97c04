// What looplab's TypeScript-ecosystem runners share: the contract of adapters/runners/_child.py read from
// the environment (a case's delegate among it), the run's tools over MCP (streamable HTTP, the run's token as
// a Bearer credential), and an outcome file written whatever happens. Plain ES modules: node runs them with no
// build step.

import { writeFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { McpError } from "@modelcontextprotocol/sdk/types.js";

/** The request `_meta` key under which looplab's tool server takes the model's tool call id. */
export const CALL_ID_META = "looplab/call_id";
/** Past the run's bound, a loop that ignored its abort signal gets this long before the outcome is written anyway. */
const BACKSTOP_MS = 2_000;

/** The contract's variables (`LOOPLAB_*`), parsed. */
export function contract() {
  const env = (name) => process.env[`LOOPLAB_${name}`] ?? "";
  const whole = (text) => (text.trim() === "" ? null : Number.parseInt(text, 10));
  const maxSeconds = Number(env("MAX_SECONDS") || "300");
  return {
    task: env("TASK"),
    systemPrompt: env("SYSTEM_PROMPT"),
    model: env("MODEL"),
    api: env("API"),
    openaiBaseURL: env("OPENAI_BASE_URL"),
    anthropicBaseURL: env("ANTHROPIC_BASE_URL"),
    geminiBaseURL: env("GEMINI_BASE_URL"), // without the API version (`/v1beta`), as google-genai takes it
    token: env("TOKEN"),
    toolsURL: env("TOOLS_URL"),
    capKnob: env("CAP_KNOB"),
    cap: whole(env("CAP")), // null: leave the framework's default
    childCap: whole(env("CHILD_CAP")), // the knob's value on every agent below the run's (null: their default)
    endingTool: env("ENDING_TOOL") || null, // the tool whose result ends the run, marked the framework's way
    retries: whole(env("RETRIES")) ?? undefined, // not given: the SDK's own default (2, as looplab's)
    stream: env("STREAM") === "1", // streamed replies; not given (a bare loop): whole ones, each runner's default
    maxSeconds,
    deadline: Date.now() + maxSeconds * 1000,
    result: env("RESULT"),
    // A case's second agent, { name, description, instructions, parameters }, and in a nested tree `delegate`, the
    // agent it may hand work to in turn, in the same form: null in a run of one agent.
    delegate: env("DELEGATE") === "" ? null : JSON.parse(env("DELEGATE")),
  };
}

/**
 * The question a call of the delegating tool carries (its `parameters`: one `question` string), from the arguments
 * as the model sent them (an object, or its JSON text); otherwise an error in one line, for the model to read
 * (looplab's `Delegate.question_in`).
 */
export function questionIn(delegate, args) {
  let value = args;
  if (typeof value === "string") {
    try {
      value = JSON.parse(value);
    } catch {
      value = null;
    }
  }
  const question = value !== null && typeof value === "object" && !Array.isArray(value) ? value.question : undefined;
  if (typeof question !== "string") throw new Error(`InvalidArguments: ${delegate.name} takes a 'question' string`);
  return question;
}

/** The run's tools, as an MCP client sees them; every call goes through looplab's Guard. */
export class McpTools {
  constructor(client, tools, deadline, signal) {
    this.client = client;
    this.tools = tools;
    this.deadline = deadline;
    this.signal = signal;
  }

  static async connect({ toolsURL, token, deadline }, signal) {
    const transport = new StreamableHTTPClientTransport(new URL(toolsURL), {
      requestInit: { headers: { Authorization: `Bearer ${token}` } },
    });
    const client = new Client({ name: "looplab-ts-runner", version: "1.0.0" });
    await client.connect(transport, { signal });
    const { tools } = await client.listTools(undefined, { signal });
    return new McpTools(client, tools, deadline, signal);
  }

  /** One call: the result's text and whether the Guard made it an error (`isError`). */
  async call(name, args, callId) {
    const params = { name, arguments: args ?? {} };
    if (callId) params._meta = { [CALL_ID_META]: callId };
    const timeout = Math.max(1, this.deadline - Date.now()); // the Guard's own deadline ends the call first
    const result = await this.client.callTool(params, undefined, { signal: this.signal, timeout });
    const text = (result.content ?? []).map((part) => (part.type === "text" ? part.text : `[${part.type}]`)).join("\n");
    return { text, isError: Boolean(result.isError) };
  }

  async close() {
    await this.client.close();
  }
}

/** `package.Name` for an error: the package whose error class it is, else `node`. */
export function errorName(error, owners) {
  const own = typeof error?.name === "string" && error.name !== "Error" ? error.name : error?.constructor?.name;
  const owner = [...owners, [(e) => e instanceof McpError, "@modelcontextprotocol/sdk"]].find(([belongs]) => belongs(error));
  return `${owner ? owner[1] : "node"}.${own || "Error"}`;
}

/**
 * Run `program({ contract, tools, signal, info })` once and write the outcome file, whatever happens.
 *
 * `program` returns the final text (and may add fields to `info`, which the outcome carries either way);
 * a throw is `ended: "raised"` with the error's name from `owners`. The whole run is bounded by
 * LOOPLAB_MAX_SECONDS through one abort signal, with a backstop timer for a loop that ignores it.
 */
export async function runOnce(program, owners) {
  const c = contract();
  const signal = AbortSignal.timeout(Math.max(1, c.deadline - Date.now()));
  const info = {};
  let outcome = null;
  let written = false;
  const write = () => {
    if (written) return;
    written = true;
    const ending = outcome ?? {
      ended: "raised",
      exception: "node.TimeoutError",
      message: `the loop ignored its abort signal ${BACKSTOP_MS} ms past LOOPLAB_MAX_SECONDS=${c.maxSeconds}`,
    };
    writeFileSync(c.result, JSON.stringify({ ...info, ...ending }));
  };
  const backstop = setTimeout(() => {
    write();
    process.exit(1);
  }, Math.max(1, c.deadline - Date.now()) + BACKSTOP_MS);
  let tools = null;
  try {
    tools = await McpTools.connect(c, signal);
    const text = await program({ contract: c, tools, signal, info });
    outcome = { ended: "returned", text: text ?? null };
  } catch (error) {
    outcome = { ended: "raised", exception: errorName(error, owners), message: String(error?.message ?? error) };
  } finally {
    write();
    clearTimeout(backstop);
    await tools?.close().catch(() => {});
    // Done: the outcome is on disk, and idle keep-alive sockets would otherwise hold the process open.
    process.exit(0);
  }
}
