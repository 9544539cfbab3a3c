/**
 * The server's API: JSON requests with the bearer token, server-sent events
 * read over fetch, and uploads with progress.
 *
 * Errors become `ApiError`s whose message is the server's `detail`; a 401 on a
 * signed-in call also tells the app that the session is over.
 */

let getToken = () => null;
let onUnauthorized = () => {};

export function configureApi({ token, unauthorized }) {
  getToken = token;
  onUnauthorized = unauthorized;
}

export class ApiError extends Error {
  constructor(message, status = 0, code = "", retryAfter = 0) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.code = code;
    this.retryAfter = retryAfter; // seconds, from a refusal's Retry-After (a 429)
  }
}

const OFFLINE = "The server is not reachable. Check that it is running and try again.";

function detailOf(body) {
  const openai = body && body.error; // /v1's shape: {"error": {"message": …}}
  if (openai && typeof openai.message === "string") return openai.message;
  const detail = body && body.detail;
  if (typeof detail === "string") return detail;
  if (Array.isArray(detail)) {
    return detail.map((item) => (item && item.msg) || "").filter(Boolean).join("; ");
  }
  return "";
}

function errorFromBody(status, statusText, body, retryAfter = 0) {
  const message = detailOf(body) || `The server answered ${status}${statusText ? ` ${statusText}` : ""}.`;
  return new ApiError(message, status, (body && body.code) || "", retryAfter);
}

function retryAfterOf(value) {
  const seconds = Number.parseInt(value || "", 10);
  return Number.isFinite(seconds) && seconds > 0 ? seconds : 0;
}

async function errorFromResponse(response) {
  let body = null;
  try {
    body = await response.json();
  } catch {
    body = null;
  }
  return errorFromBody(response.status, response.statusText, body, retryAfterOf(response.headers.get("retry-after")));
}

function headers(auth, extra) {
  const result = { ...extra };
  const token = getToken();
  if (auth && token) result.Authorization = `Bearer ${token}`;
  return result;
}

async function send(path, init, auth) {
  let response;
  try {
    response = await fetch(path, init);
  } catch (error) {
    if (error && error.name === "AbortError") throw error;
    throw new ApiError(OFFLINE, 0, "network");
  }
  if (response.status === 401 && auth) onUnauthorized();
  if (!response.ok) throw await errorFromResponse(response);
  return response;
}

/** One workspace file's metadata (GET /api/files/info). */
export function fileInfo(sessionId, name) {
  return request(`/api/files/info?${new URLSearchParams({ session_id: sessionId, name })}`);
}

/**
 * A JSON request; resolves to the parsed body, or null for 204. A `FormData` body goes
 * as multipart/form-data (the browser writes its Content-Type and boundary).
 */
export async function request(path, { method = "GET", body, signal, auth = true } = {}) {
  const extra = { Accept: "application/json" };
  const form = body instanceof FormData;
  if (body !== undefined && !form) extra["Content-Type"] = "application/json";
  const response = await send(
    path,
    {
      method,
      headers: headers(auth, extra),
      body: body === undefined || form ? body : JSON.stringify(body),
      signal,
      cache: "no-store",
    },
    auth,
  );
  if (response.status === 204) return null;
  const type = response.headers.get("content-type") || "";
  return type.includes("json") ? response.json() : response.text();
}

/**
 * Read a text/event-stream: `onEvent` gets each frame's JSON data, with `type`
 * (from `event:`) and `seq` (from `id:`) filled in when the data lacks them.
 * Resolves when the server closes the stream; rejects on a network error.
 */
export async function streamEvents(path, { signal, onEvent }) {
  const response = await send(
    path,
    { headers: headers(true, { Accept: "text/event-stream" }), signal, cache: "no-store" },
    true,
  );
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  try {
    for (;;) {
      let chunk;
      try {
        chunk = await reader.read();
      } catch (error) {
        if (error && error.name === "AbortError") throw error;
        throw new ApiError(OFFLINE, 0, "network");
      }
      if (chunk.done) break;
      buffer += chunk.value;
      const boundary = /\r\n\r\n|\n\n|\r\r/g;
      let start = 0;
      let match;
      while ((match = boundary.exec(buffer)) !== null) {
        const event = parseFrame(buffer.slice(start, match.index));
        start = boundary.lastIndex;
        if (event) onEvent(event);
      }
      buffer = buffer.slice(start);
    }
  } finally {
    reader.cancel().catch(() => {});
  }
}

function parseFrame(frame) {
  let id = "";
  let type = "message";
  const data = [];
  for (const line of frame.split(/\r\n|\n|\r/)) {
    if (!line || line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "id") id = value;
    else if (field === "event") type = value;
    else if (field === "data") data.push(value);
  }
  if (!data.length) return null;
  let payload;
  try {
    payload = JSON.parse(data.join("\n"));
  } catch {
    return null;
  }
  if (!payload || typeof payload !== "object") return null;
  if (typeof payload.type !== "string") payload.type = type;
  if (typeof payload.seq !== "number" && id !== "") payload.seq = Number(id);
  return payload;
}

/**
 * Upload one file over tus (/api/tus/, `tus-js-client`), with progress. Resumable: a
 * cut upload is retried, and the same file dropped again into the same session goes on
 * where it stopped, even after a reload. Returns `{promise, abort}`; the promise
 * resolves to the file's metadata.
 */
export function uploadFile(file, sessionId, onProgress) {
  let upload = null;
  const promise = new Promise((resolve, reject) => {
    upload = new window.tus.Upload(file, {
      endpoint: "/api/tus/",
      headers: { Authorization: `Bearer ${getToken()}` },
      metadata: { session_id: sessionId, filename: file.name },
      chunkSize: 64 * 1024 * 1024, // one PATCH per 64 MB: a cut costs at most that
      retryDelays: [0, 1000, 3000, 5000, 10000],
      removeFingerprintOnSuccess: true,
      onProgress: (sent, total) => {
        if (total > 0) onProgress(sent / total);
      },
      onError: (error) => reject(tusError(error)),
      // A full quota or disk, or a limit, is not a network blip: say so at once.
      onShouldRetry: (error) => {
        const status = error && error.originalResponse ? error.originalResponse.getStatus() : 0;
        return status === 0 || status >= 500 ? status !== 507 : status === 409 || status === 423;
      },
      onSuccess: () => {
        fileInfo(sessionId, `uploads/${file.name}`).then((info) => resolve({ ...info, name: file.name }), reject);
      },
    });
    upload.findPreviousUploads().then((previous) => {
      const same = previous.find((old) => old.metadata && old.metadata.session_id === sessionId);
      if (same) upload.resumeFromPreviousUpload(same);
      upload.start();
    }, reject);
  });
  return { promise, abort: () => upload && upload.abort(true) };
}

/** A tus-js-client error as an ApiError: the server's own words when it answered. */
function tusError(error) {
  const response = error && error.originalResponse;
  if (!response) return new ApiError(OFFLINE, 0, "network");
  const status = response.getStatus();
  if (status === 401) onUnauthorized();
  let body = null;
  try {
    body = JSON.parse(response.getBody());
  } catch {
    body = null;
  }
  return errorFromBody(status, "", body, retryAfterOf(response.getHeader("Retry-After")));
}
