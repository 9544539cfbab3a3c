// A real OpenID Provider on loopback for the OpenID Connect sign-in tests: the certified
// oidc-provider package (pinned by package-lock.json here), configured for the authorization
// code flow with PKCE (S256, required of every client), RS256 ID tokens carrying the nonce and
// the claims name, email and groups. tests/support/oidc_provider.py starts and stops it.
//
// Usage: node provider.mjs CONFIG_JSON_PATH. The config file holds:
//   port           where to listen on 127.0.0.1; 0 lets the system choose. The issuer is
//                  http://127.0.0.1:<port>, the port being the one actually bound.
//   clients        oidc-provider client metadata, e.g. {"client_id", "client_secret",
//                  "redirect_uris": [...], "token_endpoint_auth_method": "client_secret_basic"
//                  or "client_secret_post", "id_token_signed_response_alg": "RS256"}.
//   accounts_file  a JSON file {account id: claims}, claims being {sub?, name, email,
//                  email_verified?, groups: [...]}; sub defaults to the account id. It is read
//                  again at each account lookup and each claims call, so a test can change a
//                  user's groups between two sign-ins (or even between login and token).
//   issuer         optional: the issuer URL, when the provider is reached through a proxy
//                  (the tests' tampering proxy) rather than at its own port.
//   keys_file      optional: a JWKS file ({"keys": [private RSA JWKs]}, the first one signs).
//                  Read at start if it exists, else written with one new key; rewritten at
//                  each rotation, so a restarted provider keeps its keys.
//
// Stdout carries one line, `READY <issuer> <port>`, once the provider listens; oidc-provider's notices
// and any server error go to stderr. SIGTERM (or SIGINT) closes the server and exits 0.
//
// Sign-in: /interaction/<uid> shows one form, <input name="login"> (the account id, one of
// accounts_file's keys) and the buttons "Sign in" and "Cancel" (name="action", values "login"
// and "cancel"). "Sign in" with a known account logs in and grants every scope and claim the
// client asked for, with no consent page; an unknown account gets the form again, with the
// alert "Unknown account" (role="alert"); "Cancel" sends the client error=access_denied.
// A browser that signed in before has a session here: the next authorization request comes
// straight back to the client without a form, unless it says prompt=login.
//
// Key rotation: POST /test/rotate-keys makes a new RSA key, puts it first in the JWKS (it signs
// from then on) and keeps the older ones published; it answers {"kid": the new key's id,
// "kids": every published id}. oidc-provider takes its keys when it is constructed, so a new
// Provider is built with the new key set and serves every later request; every Provider built
// here shares one store (sessions, interactions, grants, codes) and the cookie keys, so a
// sign-in under way at rotation completes.
import { generateKeyPairSync, randomBytes, randomUUID } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";

import Provider, { errors } from "oidc-provider";

const config = JSON.parse(readFileSync(process.argv[2], "utf8"));

// oidc-provider prints its notices with console.info: keep stdout for the READY line.
console.info = console.error;

// The models oidc-provider ties to a grant, removed when the grant is revoked.
const GRANTABLE = new Set([
  "AccessToken",
  "AuthorizationCode",
  "RefreshToken",
  "DeviceCode",
  "BackchannelAuthenticationRequest",
]);
const entries = new Map(); // "<model>:<id>" -> {payload, expiresAt}

// oidc-provider's adapter interface over `entries`, one store for every Provider built here.
class SharedMemoryAdapter {
  constructor(model) {
    this.model = model;
  }

  key(id) {
    return `${this.model}:${id}`;
  }

  async upsert(id, payload, expiresIn) {
    const expiresAt = expiresIn ? Date.now() + expiresIn * 1000 : Infinity;
    entries.set(this.key(id), { payload, expiresAt });
  }

  async find(id) {
    const entry = entries.get(this.key(id));
    if (entry && entry.expiresAt <= Date.now()) entries.delete(this.key(id));
    return entries.get(this.key(id))?.payload;
  }

  async findBy(field, value) {
    for (const [key, { payload }] of entries) {
      if (key.startsWith(`${this.model}:`) && payload[field] === value) {
        return this.find(key.slice(this.model.length + 1));
      }
    }
    return undefined;
  }

  async findByUid(uid) {
    return this.findBy("uid", uid);
  }

  async findByUserCode(userCode) {
    return this.findBy("userCode", userCode);
  }

  async consume(id) {
    const payload = await this.find(id);
    if (payload) payload.consumed = Math.floor(Date.now() / 1000);
  }

  async destroy(id) {
    entries.delete(this.key(id));
  }

  async revokeByGrantId(grantId) {
    for (const [key, { payload }] of entries) {
      if (GRANTABLE.has(key.slice(0, key.indexOf(":"))) && payload.grantId === grantId) {
        entries.delete(key);
      }
    }
  }
}

const accountClaims = (accountId) => {
  const accounts = JSON.parse(readFileSync(config.accounts_file, "utf8"));
  return Object.hasOwn(accounts, accountId) ? accounts[accountId] : undefined;
};

async function findAccount(ctx, accountId) {
  if (!accountClaims(accountId)) return undefined;
  return {
    accountId,
    async claims() {
      const claims = accountClaims(accountId) ?? {};
      return { ...claims, sub: claims.sub ?? accountId };
    },
  };
}

const newSigningKey = () => ({
  ...generateKeyPairSync("rsa", { modulusLength: 2048 }).privateKey.export({ format: "jwk" }),
  kid: randomUUID(),
  alg: "RS256",
  use: "sig",
});

const saveKeys = () => {
  if (config.keys_file) writeFileSync(config.keys_file, JSON.stringify({ keys }, null, 2));
};

const keys =
  config.keys_file && existsSync(config.keys_file)
    ? JSON.parse(readFileSync(config.keys_file, "utf8")).keys
    : [newSigningKey()];
saveKeys();

const escapeHtml = (text) =>
  String(text).replace(
    /[&<>"']/g,
    (char) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[char],
  );

const page = (title, body) =>
  `<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><title>${escapeHtml(title)}</title></head>
<body>
<h1>${escapeHtml(title)}</h1>
${body}
</body>
</html>
`;

// oidc-provider's own error page loads a web font; this one loads nothing.
async function renderError(ctx, out) {
  ctx.type = "html";
  const lines = Object.entries(out).map(
    ([key, value]) => `<p><strong>${escapeHtml(key)}</strong>: ${escapeHtml(value)}</p>`,
  );
  ctx.body = page("Sign-in error", lines.join("\n"));
}

const DAY = 24 * 3600;
const cookieKeys = [randomBytes(32).toString("base64url")];

function buildProvider(issuer) {
  const provider = new Provider(issuer, {
    adapter: SharedMemoryAdapter,
    clients: structuredClone(config.clients),
    jwks: { keys: structuredClone(keys) },
    findAccount,
    responseTypes: ["code"],
    scopes: ["openid", "offline_access", "profile", "email", "groups"],
    claims: {
      openid: ["sub"],
      profile: ["name"],
      email: ["email", "email_verified"],
      groups: ["groups"],
    },
    // The scopes' claims go into the ID token too, not only to the userinfo endpoint.
    conformIdTokenClaims: false,
    pkce: { required: () => true },
    ttl: { AccessToken: 3600, Grant: DAY, IdToken: 3600, Interaction: 3600, Session: DAY },
    features: { devInteractions: { enabled: false } },
    interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
    // The default cookie options suit plain http on loopback: sameSite=lax, and `secure` only
    // on https requests. Every Provider built here signs them with the same keys.
    cookies: { keys: cookieKeys },
    renderError,
  });
  provider.on("server_error", (ctx, error) => console.error("server_error:", error));
  return provider;
}

const readForm = async (req) => {
  let body = "";
  for await (const chunk of req) {
    body += chunk;
    if (body.length > 64 * 1024) throw new Error("form too large");
  }
  return new URLSearchParams(body);
};

const send = (res, status, type, body) => {
  res.writeHead(status, { "Content-Type": type, "Cache-Control": "no-store" });
  res.end(body);
};

const loginForm = (uid, params, alert) => {
  const shown = alert ? `<p role="alert">${escapeHtml(alert)}</p>\n` : "";
  const hint = escapeHtml(params.login_hint ?? "");
  return page(
    "Sign in",
    `${shown}<p>to ${escapeHtml(params.client_id)}</p>
<form method="post" action="/interaction/${escapeHtml(uid)}">
  <label>Login <input name="login" autocomplete="off" required autofocus value="${hint}"></label>
  <button type="submit" name="action" value="login">Sign in</button>
  <button type="submit" name="action" value="cancel" formnovalidate>Cancel</button>
</form>`,
  );
};

// Grants whatever the consent prompt found missing, as a user pressing "Allow" would.
async function autoConsent(provider, req, res, details) {
  const { params, session } = details;
  const missing = details.prompt.details;
  const grant = details.grantId
    ? await provider.Grant.find(details.grantId)
    : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
  if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(" "));
  if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
  for (const [indicator, scopes] of Object.entries(missing.missingResourceScopes ?? {})) {
    grant.addResourceScope(indicator, scopes.join(" "));
  }
  const grantId = await grant.save();
  const consent = details.grantId ? {} : { grantId };
  await provider.interactionFinished(req, res, { consent }, { mergeWithLastSubmission: true });
}

async function interaction(provider, req, res, uid) {
  const details = await provider.interactionDetails(req, res);
  if (details.prompt.name === "consent") return autoConsent(provider, req, res, details);
  if (req.method === "GET") return send(res, 200, "text/html", loginForm(uid, details.params));
  const form = await readForm(req);
  if (form.get("action") === "cancel") {
    const result = { error: "access_denied", error_description: "End-User aborted interaction" };
    return provider.interactionFinished(req, res, result, { mergeWithLastSubmission: false });
  }
  const accountId = form.get("login") ?? "";
  if (!accountClaims(accountId)) {
    return send(res, 200, "text/html", loginForm(uid, details.params, "Unknown account"));
  }
  const result = { login: { accountId } };
  return provider.interactionFinished(req, res, result, { mergeWithLastSubmission: false });
}

let provider; // the Provider serving requests, replaced at each key rotation
let handle; // its request handler

function serve(issuer) {
  provider = buildProvider(issuer);
  handle = provider.callback();
}

function rotateKeys() {
  const key = newSigningKey();
  keys.unshift(key);
  saveKeys();
  serve(provider.issuer);
  return { kid: key.kid, kids: keys.map((each) => each.kid) };
}

const server = createServer(async (req, res) => {
  try {
    const { pathname } = new URL(req.url, provider.issuer);
    const uid = /^\/interaction\/([^/]+)$/.exec(pathname)?.[1];
    if (uid && (req.method === "GET" || req.method === "POST")) {
      await interaction(provider, req, res, uid);
    } else if (pathname === "/test/rotate-keys" && req.method === "POST") {
      send(res, 200, "application/json", JSON.stringify(rotateKeys()));
    } else {
      handle(req, res);
    }
  } catch (error) {
    if (!(error instanceof errors.SessionNotFound)) console.error("request error:", error);
    const status = error instanceof errors.OIDCProviderError ? error.status : 500;
    const lines = `<p role="alert">${escapeHtml(error.error_description ?? error.message)}</p>`;
    if (!res.headersSent) send(res, status, "text/html", page("Sign-in error", lines));
  }
});

const stop = () => {
  server.close(() => process.exit(0));
  server.closeAllConnections();
};
process.on("SIGTERM", stop);
process.on("SIGINT", stop);

server.listen(config.port ?? 0, "127.0.0.1", async () => {
  const issuer = config.issuer ?? `http://127.0.0.1:${server.address().port}`;
  serve(issuer);
  // oidc-provider checks a client's metadata at its first use: a bad one fails the start here.
  try {
    for (const { client_id } of config.clients) await provider.Client.find(client_id);
  } catch (error) {
    console.error(`bad client metadata: ${error.error_description ?? error.message}`);
    process.exit(1);
  }
  process.stdout.write(`READY ${issuer} ${server.address().port}\n`);
});
