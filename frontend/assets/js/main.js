/**
 * Wires the page: the API's token, the views, sign-in and sign-out, and the
 * start-up (restore the token, reopen the last conversation, reattach its run).
 */

import { mountAccount } from "./account.js";
import { mountBranches } from "./branches.js";
import { mountAdmin } from "./admin.js";
import { configureApi, request } from "./api.js";
import { mountComposer } from "./composer.js";
import { mountConversations, restoreConversations } from "./conversations.js";
import { mountDataSources } from "./data-sources.js";
import { byId } from "./dom.js";
import { mountEvals } from "./evals.js";
import { mountExport } from "./export.js";
import { mountFiles } from "./files.js";
import { mountGroupsAdmin } from "./groups-admin.js";
import { mountLightbox } from "./lightbox.js";
import { hideLogin, mountLogin, showLogin, signInFromProxy, takeSingleSignOn } from "./login.js";
import { mountMcpAdmin } from "./mcp-admin.js";
import { mountMessages } from "./messages.js";
import { mountModels } from "./models.js";
import { detachAll, retry, send } from "./runs.js";
import { mountSessionSources } from "./session-sources.js";
import { mountSidebar } from "./sidebar.js";
import { emit, on, state, STORAGE, storage } from "./state.js";
import { loadStatus, mountStatus } from "./status.js";
import { mountUploads } from "./uploads.js";
import { mountUsage } from "./usage.js";

function signOutLocally(message = "") {
  detachAll();
  state.token = null;
  state.user = null;
  state.items = [];
  state.conversations = [];
  state.conversationId = null;
  state.viewId += 1;
  storage.set(STORAGE.token, null);
  emit("auth");
  showLogin(message);
}

async function logout() {
  try {
    await request("/api/auth/logout", { method: "POST" });
  } catch {
    /* signed out here either way */
  }
  signOutLocally();
}

async function enterApp(token) {
  state.token = token;
  state.user = await request("/api/users/me");
  storage.set(STORAGE.token, token);
  hideLogin();
  byId("app").hidden = false;
  emit("auth");
  await restoreConversations();
  byId("composer").focus();
}

async function start() {
  configureApi({
    token: () => state.token,
    unauthorized: () => {
      if (state.token) signOutLocally("Your session has ended. Please sign in again.");
    },
  });
  mountStatus();
  mountLogin({ onSignedIn: enterApp });
  mountSidebar({ onLogout: logout });
  mountMessages();
  mountComposer();
  mountFiles();
  mountSessionSources();
  mountExport();
  mountUploads();
  mountLightbox();
  mountConversations();
  mountBranches();
  mountAccount({ onSignedOut: signOutLocally });
  mountUsage();
  mountEvals();
  mountDataSources();
  mountAdmin();
  mountGroupsAdmin();
  mountMcpAdmin();
  mountModels();
  on("retry", (turn) => retry(turn));
  on("send-branch", ({ text, keep, parentId, regenerate }) => {
    send(text, byId("agent-select").value, { keep, parentId, regenerate });
  });
  on("regenerate", (item) => {
    const at = state.items.indexOf(item);
    const question = state.items.slice(0, at).reverse().find((i) => i.kind === "user");
    if (at < 0 || !question || !question.id) return;
    const keep = state.items.indexOf(question) + 1;
    send(question.text, byId("agent-select").value, { keep, parentId: question.id, regenerate: true });
  });

  const health = loadStatus();
  const sso = takeSingleSignOn();
  const token = sso.token || storage.get(STORAGE.token) || (sso.error ? null : await signInFromProxy());
  if (sso.error) {
    showLogin(sso.error);
    await health;
    return;
  }
  if (!token) {
    showLogin();
    await health;
    return;
  }
  try {
    await enterApp(token);
  } catch (error) {
    // 401 has already shown the form; anything else (server down) too, with its reason.
    if (byId("login-view").hidden) showLogin(error.message);
  }
  await health;
}

start();
