// navigator-client.js — a browser client shell for navigatord, usable on its own by web apps.
//
// It follows one session over Server-Sent Events (GET /v1/sessions/{id}/stream) and keeps a
// mirror of the session's screen tree by the README's rule: a snapshot replaces the mirror;
// each batch applies in seq order; a gap, a batch of another epoch, or a batch that does not
// apply makes it resync from a fresh snapshot; a reconnect resumes from the last position
// (EventSource sends Last-Event-ID), and the service answers `recovered` with what was missed,
// or a snapshot. Client events (what the user did on its own) and intents go over the JSON API.
//
//   import { SessionMirror } from "/page/navigator-client.js";
//   const mirror = new SessionMirror("alice");
//   mirror.addEventListener("tree", () => render(mirror.tree));
//   mirror.start();
//   await mirror.back();            // the user pressed Back: report it
//
// Events (EventTarget): "tree" (the mirror changed; detail: {cause, batch?}), "batch" (detail:
// the CommandBatch JSON), "rejection" (detail: the Rejection JSON), "status" (detail: {state:
// "connecting" | "live" | "reconnecting" | "stopped", reason?}). All JSON is protobuf's canonical
// mapping of navigator.v1 messages: 64-bit numbers are strings.

/** Applies `commands` (CommandBatch.commands JSON) to a copy of `tree` (ScreenTree JSON). Throws
 *  when a command does not apply (the caller resyncs). Pure: the input is not changed. */
export function applyCommands(tree, commands) {
  const next = structuredClone(tree);
  next.modals = next.modals || [];
  for (const command of commands) applyOne(next, command);
  return next;
}

function stacks(tree) {
  const all = [];
  const root = tree.root || {};
  if (root.tabBar) for (const tab of root.tabBar.tabs || []) all.push({ ref: { tab: tab.name }, stack: tab.stack });
  if (root.stack) all.push({ ref: { root: true }, stack: root.stack.stack });
  for (const modal of tree.modals || []) all.push({ ref: { modal: modal.id }, stack: modal.stack });
  return all;
}

function stackOf(tree, ref) {
  const root = tree.root || {};
  if (ref.tab !== undefined) {
    const tab = (root.tabBar?.tabs || []).find((t) => t.name === ref.tab);
    if (!tab) throw new Error(`no tab ${ref.tab}`);
    return (tab.stack = tab.stack || []);
  }
  if (ref.modal !== undefined) {
    const modal = (tree.modals || []).find((m) => m.id === ref.modal);
    if (!modal) throw new Error(`no modal ${ref.modal}`);
    return (modal.stack = modal.stack || []);
  }
  if (!root.stack) throw new Error("the root is not a single stack");
  return (root.stack.stack = root.stack.stack || []);
}

function locate(tree, id) {
  for (const { ref, stack } of stacks(tree)) {
    const index = (stack || []).findIndex((s) => s.id === id);
    if (index >= 0) return { ref, stack, index };
  }
  return null;
}

function contains(tree, id) {
  return locate(tree, id) !== null || (tree.modals || []).some((m) => m.id === id);
}

function applyOne(tree, command) {
  const [kind] = Object.keys(command);
  const c = command[kind];
  switch (kind) {
    case "selectTab": {
      const bar = tree.root?.tabBar;
      if (!bar || !(bar.tabs || []).some((t) => t.name === c.tab)) throw new Error(`no tab ${c.tab}`);
      bar.selected = c.tab;
      break;
    }
    case "push":
      if (!contains(tree, c.screen.id)) stackOf(tree, c.stack || {}).push(c.screen);
      break;
    case "present":
      if (!(tree.modals || []).some((m) => m.id === c.modal.id)) tree.modals.push(c.modal);
      break;
    case "popTo": {
      const found = locate(tree, c.screenId);
      if (!found) throw new Error(`no screen ${c.screenId}`);
      found.stack.splice(found.index + 1);
      break;
    }
    case "popToRoot":
      stackOf(tree, c.stack || {}).splice(1);
      break;
    case "dismissTo": {
      if (!c.modalId || c.modalId === "0") {
        tree.modals = [];
      } else {
        const index = tree.modals.findIndex((m) => m.id === c.modalId);
        if (index < 0) throw new Error(`no modal ${c.modalId}`);
        tree.modals.splice(index + 1);
      }
      break;
    }
    case "setRoot":
      tree.root = c.root;
      tree.modals = [];
      break;
    case "replace": {
      if (c.screen.id !== c.screenId && contains(tree, c.screen.id)) {
        const old = locate(tree, c.screenId);
        if (old) old.stack.splice(old.index, 1);
        break;
      }
      const found = locate(tree, c.screenId);
      if (!found) throw new Error(`no screen ${c.screenId}`);
      found.stack[found.index] = c.screen;
      break;
    }
    case "refresh": {
      const found = locate(tree, c.screenId);
      if (!found) throw new Error(`no screen ${c.screenId}`);
      const context = (found.stack[found.index].context = found.stack[found.index].context || {});
      context.info = { ...(context.info || {}), ...(c.info || {}) };
      break;
    }
    default:
      throw new Error(`unknown command ${kind}`);
  }
}

/** The stack the user sees: the last modal's, else the selected tab's (or the root stack). */
export function topStack(tree) {
  const modals = tree.modals || [];
  if (modals.length) {
    const modal = modals[modals.length - 1];
    return { ref: { modal: modal.id }, stack: modal.stack || [] };
  }
  const bar = tree.root?.tabBar;
  if (bar) {
    const tab = (bar.tabs || []).find((t) => t.name === bar.selected) || (bar.tabs || [])[0];
    return { ref: { tab: tab?.name }, stack: tab?.stack || [] };
  }
  return { ref: { root: true }, stack: tree.root?.stack?.stack || [] };
}

/** Follows one session and keeps its mirror (see the top of this file). */
export class SessionMirror extends EventTarget {
  /** @param {string} session
   *  @param {{base?: string, token?: string, acknowledge?: boolean}} options  base: navigatord's
   *  HTTP origin ("" for this page's); token: a bearer token (secure mode; navctl token issues
   *  one); acknowledge: send `ack` events for applied batches (default true; false for a viewer
   *  that is not the user's shell, so that it lands nothing) */
  #ackTimer = null;

  constructor(session, { base = "", token = "", acknowledge = true } = {}) {
    super();
    this.session = session;
    this.base = base;
    this.token = token;
    // Acknowledge applied batches (an `ack` client event, at most every 100 ms), as a shell
    // should: that is how navigatord knows the user landed (its landing figures, the dashboard).
    this.acknowledge = acknowledge;
    this.ackFailures = 0;
    this.tree = null;
    this.seq = 0n;
    this.epoch = null;
    this.source = null;
    this.resyncs = 0;
  }

  get url() {
    return `${this.base}/v1/sessions/${encodeURIComponent(this.session)}`;
  }

  /** Opens the stream (a fresh snapshot first). */
  start() {
    this.#open();
  }

  stop() {
    this.source?.close();
    this.source = null;
    this.#status("stopped");
  }

  #status(state, reason) {
    this.dispatchEvent(new CustomEvent("status", { detail: { state, reason } }));
  }

  #open() {
    this.source?.close();
    this.#status("connecting");
    // EventSource cannot set headers: the token rides in the query.
    const query = this.token ? `?access_token=${encodeURIComponent(this.token)}` : "";
    const source = new EventSource(`${this.url}/stream${query}`);
    this.source = source;
    source.onopen = () => this.#status("live");
    source.onerror = () => {
      if (this.source !== source) return;
      // EventSource reconnects by itself, sending Last-Event-ID: the service resumes or resyncs.
      this.#status("reconnecting", "the connection to navigatord was lost");
    };
    source.addEventListener("snapshot", (e) => {
      const { snapshot } = JSON.parse(e.data);
      this.tree = snapshot.tree || {};
      this.seq = BigInt(snapshot.seq || "0");
      this.epoch = snapshot.epoch || "0";
      this.#status("live");
      this.dispatchEvent(new CustomEvent("tree", { detail: { cause: "snapshot" } }));
    });
    source.addEventListener("recovered", () => this.#status("live"));
    source.addEventListener("batch", (e) => this.#batch(JSON.parse(e.data).batch));
    source.addEventListener("closed", (e) => {
      // The stream ended for good (the token expired): a new token is needed to go on.
      source.close();
      this.#status("stopped", JSON.parse(e.data).closed);
    });
    source.addEventListener("rejection", (e) => {
      this.dispatchEvent(new CustomEvent("rejection", { detail: JSON.parse(e.data).rejection }));
    });
  }

  /** Starts again from a fresh snapshot (a new stream without a position). */
  resync(reason) {
    this.resyncs += 1;
    this.#status("reconnecting", reason);
    this.#open();
  }

  #batch(batch) {
    const seq = BigInt(batch.seq || "0");
    const epoch = batch.epoch || "0";
    if (this.tree === null) return; // a snapshot comes first
    if (epoch !== this.epoch) return this.resync(`batch of epoch ${epoch}; the mirror is of ${this.epoch}`);
    if (seq <= this.seq) return; // already in the mirror
    if (seq !== this.seq + 1n) return this.resync(`gap: expected seq ${this.seq + 1n}, got ${seq}`);
    try {
      this.tree = applyCommands(this.tree, batch.commands || []);
    } catch (error) {
      return this.resync(`batch ${seq} does not apply: ${error.message}`);
    }
    this.seq = seq;
    if (this.acknowledge) this.#acknowledgeSoon();
    this.dispatchEvent(new CustomEvent("batch", { detail: batch }));
    this.dispatchEvent(new CustomEvent("tree", { detail: { cause: "batch", batch } }));
  }

  /** One `ack` for the batches applied in the next 100 ms. A failed one is counted in
   *  `ackFailures` (the intents it would have landed count as not landed). */
  #acknowledgeSoon() {
    if (this.#ackTimer !== null) return;
    this.#ackTimer = setTimeout(() => {
      this.#ackTimer = null;
      this.report({ ack: { seq: this.seq.toString() } }).catch(() => { this.ackFailures += 1; });
    }, 100);
  }

  #auth() {
    return this.token ? { Authorization: `Bearer ${this.token}` } : {};
  }

  async #post(path, body) {
    const response = await fetch(`${this.base}${path}`, {
      method: "POST",
      headers: { "Content-Type": "application/json", ...this.#auth() },
      body: JSON.stringify(body),
    });
    const reply = await response.json();
    if (reply.rejected) {
      const error = new Error(reply.rejected.message);
      error.code = reply.rejected.code;
      error.status = response.status;
      throw error;
    }
    return reply;
  }

  /** Reports a client event (ClientEvent JSON without session/lastSeq/epoch); a stale one
   *  (the tree changed meanwhile) is refused with code REJECT_CODE_STALE_EVENT. */
  report(event) {
    return this.#post(`/v1/sessions/${encodeURIComponent(this.session)}/events`, {
      lastSeq: this.seq.toString(),
      epoch: this.epoch || "0",
      ...event,
    });
  }

  /** The user went Back: to the screen below the top of the visible stack. */
  back() {
    const { stack } = topStack(this.tree || {});
    if (stack.length < 2) return Promise.reject(new Error("nothing to go back to"));
    return this.report({ poppedTo: { screenId: stack[stack.length - 2].id } });
  }

  /** The user dismissed the top modal. */
  dismiss() {
    const modals = this.tree?.modals || [];
    if (!modals.length) return Promise.reject(new Error("no modal to dismiss"));
    const below = modals.length > 1 ? modals[modals.length - 2].id : "0";
    return this.report({ dismissedTo: { modalId: below } });
  }

  /** The user selected a tab. */
  selectTab(tab) {
    return this.report({ tabSelected: { tab } });
  }

  /** Sends an intent to this session (Intent JSON without session); `wait`: its outcome. */
  sendIntent(intent, { wait = true } = {}) {
    return this.#post(`/v1/intents${wait ? "?wait=true" : ""}`, { ...intent, session: this.session });
  }

  /** What an intent would do now; nothing changes. */
  explain(intent) {
    return this.#post("/v1/explain", { ...intent, session: this.session });
  }

  /** The full snapshot (with conditions and parked intents). */
  async snapshot() {
    const reply = await (await fetch(this.url, { headers: this.#auth() })).json();
    if (reply.rejected) throw new Error(reply.rejected.message);
    return reply.snapshot;
  }
}
