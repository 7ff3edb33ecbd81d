// The live session page: a browser client shell and inspector built on navigator-client.js.
import { SessionMirror, topStack } from "/page/navigator-client.js";

const $ = (id) => document.getElementById(id);
let mirror = null;

function text(tag, content, className) {
  const element = document.createElement(tag);
  element.textContent = content;
  if (className) element.className = className;
  return element;
}

function screenLabel(screen) {
  const info = screen.context?.info || {};
  const keys = Object.keys(info).sort();
  return { name: screen.context?.screen || "?", info: keys.map((k) => `${k}=${info[k]}`).join(" ") };
}

function renderStack(title, stack, { selected = false, modal = false, isTop = false } = {}) {
  const box = document.createElement("div");
  box.className = `stack${selected ? " selected" : ""}${modal ? " modal" : ""}`;
  box.append(text("h3", title));
  (stack || []).forEach((screen, index) => {
    const { name, info } = screenLabel(screen);
    const item = text("div", name, `screen${isTop && index === stack.length - 1 ? " top" : ""}`);
    item.dataset.screen = name;
    item.dataset.id = screen.id;
    if (info) item.append(text("small", info));
    box.append(item);
  });
  return box;
}

function render() {
  const tree = mirror?.tree;
  const tabs = $("tabs");
  const container = $("tree");
  tabs.replaceChildren();
  container.replaceChildren();
  if (!tree) return;
  const modals = tree.modals || [];
  const bar = tree.root?.tabBar;
  if (bar) {
    for (const tab of bar.tabs || []) {
      const button = text("button", tab.name, tab.name === bar.selected ? "selected" : "");
      button.type = "button";
      button.dataset.tab = tab.name;
      button.addEventListener("click", () => act(() => mirror.selectTab(tab.name)));
      tabs.append(button);
      container.append(
        renderStack(`tab ${tab.name}`, tab.stack, { selected: tab.name === bar.selected, isTop: !modals.length && tab.name === bar.selected }));
    }
  } else {
    container.append(renderStack("root", tree.root?.stack?.stack, { selected: true, isTop: !modals.length }));
  }
  modals.forEach((modal, index) => {
    const style = (modal.style || "PRESENTATION_STYLE_SHEET").replace("PRESENTATION_STYLE_", "").toLowerCase();
    container.append(renderStack(`modal #${modal.id} (${style})`, modal.stack, { modal: true, isTop: index === modals.length - 1 }));
  });
  $("back").disabled = topStack(tree).stack.length < 2;
  $("dismiss").disabled = !modals.length;
  $("position").textContent = `epoch ${mirror.epoch} · seq ${mirror.seq}`;
}

async function act(action) {
  $("notice").textContent = "";
  try {
    await action();
  } catch (error) {
    $("notice").textContent = `${error.code ? error.code.replace("REJECT_CODE_", "") + ": " : ""}${error.message}`;
  }
}

let parkedTimer = null;
function refreshParked() {
  clearTimeout(parkedTimer);
  parkedTimer = setTimeout(async () => {
    if (!mirror) return;
    try {
      const snapshot = await mirror.snapshot();
      const box = $("parked");
      box.replaceChildren();
      const conditions = Object.entries(snapshot.conditions || {});
      box.append(text("p", conditions.length ? `conditions: ${conditions.map(([k, v]) => `${k}=${v}`).join(", ")}` : "no conditions"));
      const parked = snapshot.parked || [];
      if (!parked.length) box.append(text("p", "no parked intents", "hint"));
      for (const item of parked) {
        const target = (item.intent?.path || []).map((c) => c.screen).join(" › ") || item.intent?.url || "";
        const line = text("p", `${item.intent?.id}: ${target} — ${item.reason}`);
        if (item.guardCondition) {
          const button = text("button", `set ${item.guardCondition}=true`);
          button.type = "button";
          button.addEventListener("click", () => act(() => mirror.report({ conditions: { set: { [item.guardCondition]: true } } })));
          line.append(" ", button);
        }
        box.append(line);
      }
    } catch (error) {
      $("parked").replaceChildren(text("p", `${error.message}; trying again`, "hint"));
      setTimeout(refreshParked, 1000);
    }
  }, 150);
}

function follow(session) {
  mirror?.stop();
  $("batches").replaceChildren();
  // Secure mode: the page's URL carries the token (?session=…&token=…).
  mirror = new SessionMirror(session, { token: new URLSearchParams(location.search).get("token") || "" });
  mirror.addEventListener("status", (e) => {
    const { state, reason } = e.detail;
    $("status").dataset.state = state;
    $("status").textContent = reason ? `${state}: ${reason}` : state;
  });
  mirror.addEventListener("tree", (e) => {
    render();
    refreshParked();
    if (e.detail.cause === "snapshot") {
      $("batches").prepend(text("li", `snapshot: epoch ${mirror.epoch}, seq ${mirror.seq}`, "hint"));
    }
  });
  mirror.addEventListener("batch", (e) => {
    const batch = e.detail;
    const cause = (batch.cause || "").replace("BATCH_CAUSE_", "").toLowerCase();
    const item = text("li", `seq ${batch.seq} (${cause}${batch.intentId ? " " + batch.intentId : ""}): ${batch.summary || ""}`);
    item.append(text("code", " " + (batch.commands || []).map((c) => Object.keys(c)[0]).join(", ")));
    $("batches").prepend(item);
    refreshServiceSoon();
  });
  mirror.addEventListener("rejection", (e) => {
    const rejection = e.detail;
    const item = text("li", `rejected ${rejection.intentId || ""}: ${rejection.message}`);
    $("batches").prepend(item);
    refreshServiceSoon();
  });
  mirror.start();
  const params = new URLSearchParams(location.search);
  params.set("session", session);
  history.replaceState(null, "", `?${params}`);
}

function intentFromForm() {
  const info = {};
  for (const pair of $("info").value.split(/\s+/).filter(Boolean)) {
    const at = pair.indexOf("=");
    if (at > 0) info[pair.slice(0, at)] = pair.slice(at + 1);
  }
  return { id: `page-${Date.now()}-${Math.floor(Math.random() * 1e6)}`, path: [{ screen: $("screen").value.trim(), info }] };
}

function showOutcome(reply) {
  const [kind] = Object.keys(reply).filter((k) => k !== "requestId" && k !== "explanationSteps");
  const steps = (reply.explanationSteps || []).map((s) => `${s.decisive ? "*" : "-"} ${s.step}: ${s.detail}`);
  $("outcome").textContent = [kind || "accepted", ...steps].join("\n");
  refreshServiceSoon();
}

async function refreshService() {
  try {
    const metrics = await (await fetch("/metrics")).text();
    const wanted = [
      ["navigator_intents_total{outcome=\"resolved\"}", "intents resolved"],
      ["navigator_intents_total{outcome=\"parked\"}", "intents parked"],
      ["navigator_intents_total{outcome=\"rejected\"}", "intents rejected"],
      ["navigator_client_events_total", "client events"],
      ["navigator_sessions", "sessions"],
      ["navigator_parked_intents", "parked intents"],
      ["navigator_subscribed_topics", "subscribed topics"],
    ];
    const list = $("service");
    list.replaceChildren();
    for (const [metric, label] of wanted) {
      const line = metrics.split("\n").find((l) => l.startsWith(metric + " ") || l.startsWith(metric + "{"));
      if (!line) continue;
      // Counts and gauges alike are whole numbers here (Prometheus writes gauges as 1.0).
      const value = Number(line.split(" ").pop());
      list.append(text("dt", label), text("dd", Number.isFinite(value) ? Math.round(value).toLocaleString("en") : "?"));
    }
  } catch {
    // navigatord is away; the status shows it.
  }
}

// The panel keeps up with what the page shows: read again soon after each batch, rejection or
// outcome, and every 2 s besides.
let serviceSoon = null;
function refreshServiceSoon() {
  clearTimeout(serviceSoon);
  serviceSoon = setTimeout(refreshService, 100);
}

$("follow").addEventListener("submit", (e) => {
  e.preventDefault();
  follow($("session").value.trim());
});
$("back").addEventListener("click", () => act(() => followed().back()));
$("dismiss").addEventListener("click", () => act(() => followed().dismiss()));
function followed() {
  if (!mirror) throw new Error("follow a session first");
  return mirror;
}
$("intent").addEventListener("submit", (e) => {
  e.preventDefault();
  act(async () => showOutcome(await followed().sendIntent(intentFromForm())));
});
$("explain").addEventListener("click", () => act(async () => showOutcome(await followed().explain(intentFromForm()))));

const initial = new URLSearchParams(location.search).get("session");
if (initial) {
  $("session").value = initial;
  follow(initial);
}
refreshService();
setInterval(refreshService, 2000);
