// Loaded before a runner's program when looplab runs it as a bare loop (`node --import`, adapters/runners/_node.py),
// never in a looplab run: with no recording proxy in front of the model, this counts the program's model requests.
// It wraps the global `fetch` (every SDK these programs use sends through it): a request to the origin of one of the
// contract's model base URLs counts once it is answered. When the process exits, the count is written to the file
// LOOPLAB_BARE_COUNT names.

import { writeFileSync } from "node:fs";

const origins = new Set(
  ["OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "GEMINI_BASE_URL"]
    .map((name) => process.env[`LOOPLAB_${name}`] ?? "")
    .filter((url) => url !== "")
    .map((url) => new URL(url).origin),
);
const countFile = process.env.LOOPLAB_BARE_COUNT ?? "";
const plainFetch = globalThis.fetch;
let answered = 0;

/** The URL a `fetch` call asks for, whichever form it was given in. */
function urlOf(input) {
  if (typeof input === "string") return input;
  return input instanceof URL ? input.href : input.url;
}

globalThis.fetch = async (input, init) => {
  const toModel = origins.has(new URL(urlOf(input)).origin);
  const response = await plainFetch(input, init);
  if (toModel) answered += 1;
  return response;
};

process.on("exit", () => {
  if (countFile !== "") writeFileSync(countFile, String(answered));
});
