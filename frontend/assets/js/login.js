/**
 * The sign-in form, and single sign-on's button when the server has an identity provider.
 * A refused password, or a refused single sign-on, shows the server's own message.
 */

import { request } from "./api.js";
import { byId } from "./dom.js";

let errorBox;

function showError(message) {
  errorBox.textContent = message;
  errorBox.hidden = !message;
}

/** Show the form (with an optional message, e.g. "session expired"). */
export function showLogin(message = "") {
  byId("app").hidden = true;
  byId("login-view").hidden = false;
  byId("login-password").value = "";
  showError(message);
  byId("login-username").focus();
  showSignInMethods();
}

/** Single sign-on's button, named for the provider, when the server has one. */
async function showSignInMethods() {
  let methods;
  try {
    methods = await request("/api/auth/methods", { auth: false });
  } catch {
    return; // the password form still works
  }
  const sso = byId("login-sso");
  sso.hidden = !methods.oidc;
  if (methods.oidc) {
    const link = byId("login-sso-link");
    link.textContent = `Sign in with ${methods.oidc.name}`;
    link.href = methods.oidc.login_url;
  }
}

/**
 * Behind an authenticating proxy (the server says so): the token for the user it names,
 * or null when it names none.
 */
export async function signInFromProxy() {
  try {
    const methods = await request("/api/auth/methods", { auth: false });
    if (!methods.proxy) return null;
    const token = await request("/api/auth/proxy", { method: "POST", auth: false });
    return token.access_token;
  } catch {
    return null; // the sign-in form then
  }
}

/**
 * What single sign-on left in the address's fragment: its token, or why it was refused.
 * The fragment is cleared at once, so the token is neither kept in history nor shared.
 */
export function takeSingleSignOn() {
  const params = new URLSearchParams(window.location.hash.slice(1));
  const token = params.get("sso_token");
  const error = params.get("sso_error");
  if (token === null && error === null) return {};
  window.history.replaceState(null, "", window.location.pathname + window.location.search);
  return { token, error };
}

export function hideLogin() {
  byId("login-view").hidden = true;
  showError("");
}

export function mountLogin({ onSignedIn }) {
  errorBox = byId("login-error");
  const form = byId("login-form");
  const submit = form.querySelector("button[type=submit]");
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const username = byId("login-username").value.trim();
    const password = byId("login-password").value;
    if (!username || !password) {
      showError("Enter your username and password.");
      return;
    }
    submit.disabled = true;
    showError("");
    try {
      const token = await request("/api/auth/login", {
        method: "POST",
        body: { username, password },
        auth: false,
      });
      await onSignedIn(token.access_token);
    } catch (error) {
      showError(error.message || "Sign-in failed.");
      byId("login-password").select();
    } finally {
      submit.disabled = false;
    }
  });
}
