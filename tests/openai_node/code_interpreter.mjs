// The Code Interpreter flow through the official OpenAI Node SDK, unchanged, against the
// server's /v1 (tests/api/test_openai_node.py runs it): upload a CSV with the Files API,
// make a container holding it, ask the Responses API with the code_interpreter tool (once
// whole, once streamed), list and download the container's files, delete the upload.
//
// Environment: OPENAI_BASE_URL and OPENAI_API_KEY (read by the SDK's options below),
// OPENAI_MODEL, CSV_TEXT (the file's content), QUESTION and STREAM_QUESTION (the inputs).
// Prints one JSON object on stdout with what it saw; any SDK error exits non-zero.
import { createHash } from "node:crypto";

import OpenAI, { toFile } from "openai";

const env = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
};

const client = new OpenAI({
  baseURL: env("OPENAI_BASE_URL"),
  apiKey: env("OPENAI_API_KEY"),
  maxRetries: 0,
  timeout: 120_000,
});
const model = env("OPENAI_MODEL");

// What a response shows of its code_interpreter_call items and of its text's citations.
const seen = (response) => {
  const calls = response.output.filter((item) => item.type === "code_interpreter_call");
  const parts = response.output
    .filter((item) => item.type === "message")
    .flatMap((item) => item.content);
  return {
    id: response.id,
    status: response.status,
    // A streamed response.completed carries the plain object, without the SDK's output_text.
    answer: parts
      .filter((part) => part.type === "output_text")
      .map((part) => part.text)
      .join(""),
    output_types: response.output.map((item) => item.type),
    calls: calls.map(({ status, code, outputs, container_id }) => ({
      status,
      code,
      outputs,
      container_id,
    })),
    annotations: parts.flatMap((part) => part.annotations ?? []),
  };
};

let step = "start"; // the SDK call under way, named in an error

async function main() {
  const csv = env("CSV_TEXT");
  step = "files.create";
  const uploaded = await client.files.create({
    file: await toFile(Buffer.from(csv), "sales.csv", { type: "text/csv" }),
    purpose: "user_data",
  });
  step = "containers.create";
  const container = await client.containers.create({
    name: "node-sdk-sales",
    file_ids: [uploaded.id],
  });
  const tools = [{ type: "code_interpreter", container: container.id }];
  const include = ["code_interpreter_call.outputs"];

  step = "responses.create";
  const whole = await client.responses.create({ model, input: env("QUESTION"), tools, include });

  step = "responses.create (stream)";
  const events = [];
  let completed = null;
  const stream = await client.responses.create({
    model,
    input: env("STREAM_QUESTION"),
    tools,
    include,
    stream: true,
  });
  for await (const event of stream) {
    events.push(event.type);
    if (event.type === "response.completed") completed = event.response;
  }
  if (completed === null) throw new Error(`the stream ended without response.completed`);

  step = "containers.files.list";
  const files = [];
  for await (const file of client.containers.files.list(container.id)) files.push(file);
  const downloads = {};
  for (const file of files) {
    step = `containers.files.content.retrieve (${file.path})`;
    const content = await client.containers.files.content.retrieve(file.id, {
      container_id: container.id,
    });
    const bytes = Buffer.from(await content.arrayBuffer());
    downloads[file.path] = {
      bytes: bytes.length,
      sha256: createHash("sha256").update(bytes).digest("hex"),
    };
  }
  step = "files.delete";
  const deleted = await client.files.delete(uploaded.id);

  return {
    file: { id: uploaded.id, filename: uploaded.filename, bytes: uploaded.bytes },
    container: { id: container.id, name: container.name },
    response: seen(whole),
    stream: { events, response: seen(completed) },
    container_files: files.map(({ id, path, source, bytes }) => ({ id, path, source, bytes })),
    downloads,
    deleted: { id: deleted.id, deleted: deleted.deleted },
  };
}

try {
  process.stdout.write(`${JSON.stringify(await main())}\n`);
} catch (error) {
  // An APIError's message names the status; its `error` is the server's error body.
  const body = error?.error === undefined ? "" : ` ${JSON.stringify(error.error)}`;
  const cause = error?.cause ? ` (${error.cause})` : "";
  process.stderr.write(`${step}: ${error?.constructor?.name}: ${error?.message}${body}${cause}\n`);
  process.exit(1);
}
