// The dashboard: navigatord's last hour from GET /v1/dashboard (a sample every 5 s, kept in its
// memory), drawn as SVG by hand — no chart library, nothing fetched but from navigatord.
// Secure mode: the page's URL carries a token (?token=…) of a client that may read stats.

const SVG = "http://www.w3.org/2000/svg";
const palette = ["#2a5bd7", "#1f8a4c", "#8a93a6", "#b7791f", "#9b51e0", "#d97706", "#b42318", "#0e7490", "#be185d", "#4d7c0f"];
const outcomeColors = {
  resolved: "#2a5bd7", refreshed: "#0e7490", ignored: "#8a93a6", parked: "#b7791f",
  released: "#1f8a4c", expired: "#d97706", refused: "#7c2d12", rejected: "#b42318",
};
const $ = (id) => document.getElementById(id);

function node(name, attributes = {}, text) {
  const element = document.createElementNS(SVG, name);
  for (const [key, value] of Object.entries(attributes)) element.setAttribute(key, value);
  if (text !== undefined) element.textContent = text;
  return element;
}

/** A value to show: whole numbers as such, others with at most two decimals. */
function number(value) {
  if (value === null || value === undefined || Number.isNaN(value)) return "—";
  if (Number.isInteger(value)) return value.toLocaleString("en");
  return value >= 100 ? Math.round(value).toLocaleString("en") : value.toFixed(value >= 10 ? 1 : 2);
}

/** The smallest of 1, 2, 5 × 10^k at or above `value`: the top of an axis. */
function niceTop(value) {
  if (!(value > 0)) return 1;
  const power = 10 ** Math.floor(Math.log10(value));
  return [1, 2, 5, 10].map((step) => step * power).find((top) => top >= value);
}

/**
 * A chart of `series` ({name, color, values: [number|null]}) over the samples' intervals
 * (`spans`: [start, end] in unix ms), each value held over its interval (steps), the y axis from
 * 0, a legend with each series' latest value.
 */
function lineChart(container, spans, series, unit = "") {
  const times = spans.map((span) => span[1]);
  container.replaceChildren();
  const shown = series.filter((s) => s.values.some((v) => v !== null && v > 0));
  if (times.length === 0 || shown.length === 0) {
    container.append(Object.assign(document.createElement("p"), { className: "empty", textContent: "nothing yet" }));
    return;
  }
  const width = 600, height = 210, left = 48, right = 12, top = 10, bottom = 24;
  const svg = node("svg", { viewBox: `0 0 ${width} ${height}`, role: "img" });
  const first = spans[0][0], last = times[times.length - 1], span = Math.max(1, last - first);
  const max = niceTop(Math.max(...shown.flatMap((s) => s.values.filter((v) => v !== null))));
  const x = (t) => left + ((t - first) / span) * (width - left - right);
  const y = (v) => top + (1 - v / max) * (height - top - bottom);
  for (const fraction of [0, 0.5, 1]) {
    svg.append(node("line", { class: fraction ? "grid" : "axis", x1: left, x2: width - right, y1: y(max * fraction), y2: y(max * fraction) }));
    svg.append(node("text", { x: left - 6, y: y(max * fraction) + 4, "text-anchor": "end" }, number(max * fraction) + unit));
  }
  const minutes = Math.round(span / 60000);
  svg.append(node("text", { x: left, y: height - 6 }, minutes >= 1 ? `−${minutes} min` : `−${Math.round(span / 1000)} s`));
  svg.append(node("text", { x: width - right, y: height - 6, "text-anchor": "end" }, "now"));
  for (const s of shown) {
    // A gap (null) ends a line: no acknowledgement in an interval means no time to land.
    let points = [];
    const flush = () => {
      if (points.length === 1) svg.append(node("circle", { cx: points[0][0], cy: points[0][1], r: 2, fill: s.color }));
      if (points.length > 1) svg.append(node("polyline", { class: "series", stroke: s.color, points: points.map((p) => p.join(",")).join(" ") }));
      points = [];
    };
    s.values.forEach((v, i) => {
      if (v === null) return flush();
      points.push([x(spans[i][0]).toFixed(1), y(v).toFixed(1)], [x(spans[i][1]).toFixed(1), y(v).toFixed(1)]);
    });
    flush();
  }
  container.append(svg);
  const legend = document.createElement("div");
  legend.className = "legend";
  for (const s of shown) {
    const latest = [...s.values].reverse().find((v) => v !== null);
    const item = document.createElement("span");
    item.style.setProperty("--color", s.color);
    item.textContent = `${s.name} ${number(latest)}${unit}`;
    legend.append(item);
  }
  container.append(legend);
}

/** Horizontal bars of each route's landing rate over the whole history, the worst first. */
function routeBars(container, samples) {
  container.replaceChildren();
  const routes = new Map();
  for (const sample of samples) {
    for (const [route, n] of Object.entries(sample.landed)) (routes.get(route) ?? routes.set(route, { landed: 0, notLanded: 0 }).get(route)).landed += n;
    for (const [route, n] of Object.entries(sample.notLanded)) (routes.get(route) ?? routes.set(route, { landed: 0, notLanded: 0 }).get(route)).notLanded += n;
  }
  const rows = [...routes.entries()]
    .map(([route, c]) => ({ route, ...c, rate: c.landed / (c.landed + c.notLanded) }))
    .filter((r) => r.landed + r.notLanded > 0)
    .sort((a, b) => a.rate - b.rate || a.route.localeCompare(b.route));
  if (rows.length === 0) {
    container.append(Object.assign(document.createElement("p"), { className: "empty", textContent: "no intent settled yet (landed or not)" }));
    return;
  }
  const width = 1000, row = 22, left = 170, right = 190;
  const svg = node("svg", { viewBox: `0 0 ${width} ${rows.length * row + 8}`, role: "img", class: "bars" });
  rows.forEach((r, i) => {
    const yTop = 4 + i * row;
    const barWidth = (width - left - right) * r.rate;
    const color = r.rate < 0.5 ? "#b42318" : r.rate < 0.9 ? "#b7791f" : "#1f8a4c";
    svg.append(node("text", { class: "label", x: left - 8, y: yTop + 15, "text-anchor": "end", "data-route": r.route }, r.route));
    svg.append(node("rect", { x: left, y: yTop + 3, width: width - left - right, height: row - 8, fill: "#eceef3" }));
    svg.append(node("rect", { x: left, y: yTop + 3, width: Math.max(barWidth, 1), height: row - 8, fill: color }));
    svg.append(node("text", { x: width - right + 8, y: yTop + 15 }, `${(r.rate * 100).toFixed(1)} %  (${number(r.landed)} of ${number(r.landed + r.notLanded)})`));
  });
  container.append(svg);
}

/** The q quantile of a histogram's counts, as the upper bound of its bucket, in ms. */
function quantile(q, counts, bounds) {
  const total = counts.reduce((a, b) => a + b, 0);
  if (total === 0) return null;
  const rank = Math.ceil(total * q);
  let seen = 0;
  for (let i = 0; i < counts.length; i++) {
    seen += counts[i];
    if (seen >= rank) return (i < bounds.length ? bounds[i] : bounds[bounds.length - 1] * 2) * 1000;
  }
  return null;
}

function draw(history) {
  const samples = history.samples;
  // Each sample holds over its interval: from where it began (the previous one's end) to its end.
  const spans = samples.map((s) => [s.at - s.seconds * 1000, s.at]);
  const chart = (id, series, unit) => lineChart($(id), spans, series, unit);
  const perSecond = (pick) => samples.map((s) => pick(s) / s.seconds);
  const outcomes = Object.keys(outcomeColors);
  chart("intents", outcomes.map((o) => ({ name: o, color: outcomeColors[o], values: perSecond((s) => s.intents[o] || 0) })), "/s");
  chart("land", [0.5, 0.9, 0.99].map((q, i) => ({
    name: `p${Math.round(q * 100)}`, color: palette[i],
    values: samples.map((s) => quantile(q, s.land, history.bounds)),
  })), " ms");
  routeBars($("routes"), samples);
  const codes = [...new Set(samples.flatMap((s) => Object.keys(s.rejections)))].sort();
  chart("rejections", codes.map((code, i) => ({ name: code, color: palette[(i + 6) % palette.length], values: perSecond((s) => s.rejections[code] || 0) })), "/s");
  chart("sessions", [
    { name: "sessions", color: palette[0], values: samples.map((s) => s.sessions) },
    { name: "parked intents", color: palette[3], values: samples.map((s) => s.parked) },
  ], "");
  const minutes = Math.round((history.capacity * history.intervalSeconds) / 60);
  $("window").textContent = `${samples.length} samples of ${history.intervalSeconds} s (the last ${minutes} min kept) · landing window ${history.landingWindowSeconds} s`;
}

async function refresh() {
  const token = new URLSearchParams(location.search).get("token");
  try {
    const response = await fetch("/v1/dashboard" + (token ? `?access_token=${encodeURIComponent(token)}` : ""));
    const body = await response.json();
    if (!response.ok) throw new Error(body.rejected?.message || `HTTP ${response.status}`);
    draw(body);
    $("status").dataset.state = "live";
    $("status").textContent = `live · ${new Date().toLocaleTimeString("en-GB")}`;
  } catch (error) {
    $("status").dataset.state = "reconnecting";
    $("status").textContent = `${error.message}; trying again`;
  }
}

refresh();
setInterval(refresh, 5000);
