/**
 * The sign-in form. A refused password shows the server's own message.
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
