/**
 * The viewer's only script, served as `/viewer.js`: it follows the session's
 * server-sent events and appends each new entry's row (rendered and escaped by
 * the server) to the timeline, puts in the header, charts, denials and time
 * axis the server redraws as entries come (`overview` events), keeps the
 * window's "entries X–Y of N" current, keeps the list of sessions current on
 * the list page and filters it by id (a story by any of its ids), and it adds the
 * timeline's filters: by tool, by agent, by verdict (the call rows' `data-tool`,
 * `data-agent`, `data-verdict`) and a text search over the rows, applied to live
 * rows as they come. Without it the page is complete as of loading.
 *
 * @since 0.1.0
 */

/**
 * The text of `/viewer.js`.
 *
 * @since 0.1.0
 */
export const VIEWER_SCRIPT = `"use strict";
const filters = (() => {
  const anchor = document.getElementById("window");
  if (anchor === null) return { add: () => {} };
  const rows = () => document.querySelectorAll("table.tl tbody tr[data-seq]");
  const bar = document.createElement("div");
  bar.id = "filters";
  bar.className = "filters";
  const select = (id, label, any) => {
    const el = document.createElement("select");
    el.id = id;
    el.setAttribute("aria-label", label);
    const option = document.createElement("option");
    option.value = "";
    option.textContent = any;
    el.append(option);
    bar.append(el);
    return el;
  };
  const tool = select("filter-tool", "tool", "any tool");
  const agent = select("filter-agent", "agent", "any agent");
  const verdict = select("filter-verdict", "verdict", "any verdict");
  for (const [value, text] of [["allow", "allowed"], ["deny", "denied"]]) {
    const option = document.createElement("option");
    option.value = value;
    option.textContent = text;
    verdict.append(option);
  }
  const search = document.createElement("input");
  search.type = "search";
  search.id = "filter-text";
  search.placeholder = "search the rows";
  search.setAttribute("aria-label", "search");
  bar.append(search);
  const shown = document.createElement("span");
  shown.id = "filter-shown";
  shown.className = "muted";
  bar.append(shown);
  anchor.after(bar);
  const known = { tool: new Set(), agent: new Set() };
  const learn = (row) => {
    for (const [key, el] of [["tool", tool], ["agent", agent]]) {
      const value = row.dataset[key];
      if (value === undefined || value === "" || known[key].has(value)) continue;
      known[key].add(value);
      const option = document.createElement("option");
      option.value = value;
      option.textContent = value;
      const after = [...el.options].slice(1).find((o) => o.value > value);
      el.insertBefore(option, after === undefined ? null : after);
    }
  };
  const matches = (row) => {
    const q = search.value.trim().toLowerCase();
    return (tool.value === "" || row.dataset.tool === tool.value) &&
      (agent.value === "" || row.dataset.agent === agent.value) &&
      (verdict.value === "" || row.dataset.verdict === verdict.value) &&
      (q === "" || (row.textContent || "").toLowerCase().includes(q));
  };
  const apply = () => {
    let n = 0, total = 0;
    for (const row of rows()) {
      total++;
      row.hidden = !matches(row);
      if (!row.hidden) n++;
    }
    const active = tool.value !== "" || agent.value !== "" || verdict.value !== "" || search.value.trim() !== "";
    shown.textContent = active ? n + " of " + total + " rows shown" : "";
    bar.dataset.shown = String(n);
  };
  for (const row of rows()) learn(row);
  for (const el of [tool, agent, verdict]) el.addEventListener("change", apply);
  search.addEventListener("input", apply);
  apply();
  return {
    add: (row) => {
      if (row === null) return;
      learn(row);
      apply();
    }
  };
})();
(() => {
  const status = document.getElementById("live-status");
  const body = document.getElementById("live");
  if (status === null || body === null) return;
  const from = Number(status.dataset.from || "0");
  const prev = status.dataset.prev;
  const url = location.pathname.replace(/\\/$/, "") + "/events?from=" + from + (prev ? "&prev=" + prev : "");
  const source = new EventSource(url);
  const overview = document.getElementById("overview");
  // The newest entry the header counts: rows counted before their redrawn header
  // comes are bumped once, and a header older than what is counted is skipped.
  let counted = Number(overview === null ? "-1" : overview.dataset.last || "-1");
  let lastRow = from - 1;
  const windowText = (total) => {
    const el = document.getElementById("window");
    if (el === null) return;
    const start = Number(el.dataset.from || "0");
    if (lastRow >= start) el.textContent = "entries " + start + "–" + lastRow + " of " + total;
  };
  const bump = (id, by) => {
    const el = document.getElementById(id);
    if (el !== null) el.textContent = String(Number.parseInt(el.textContent || "0", 10) + by);
  };
  const count = (data) => {
    if (data.sequence <= counted) return;
    counted = data.sequence;
    bump("count-entries", 1);
    if (data.replace !== null && data.replace !== undefined) {
      if (data.kind !== "tool") bump("count-others", 1);
      return;
    }
    if (data.message) bump("count-messages", 1);
    else if (data.kind === "tool") bump("count-tools", 1);
    else bump("count-others", 1);
    if (data.denied) {
      const el = document.getElementById("count-denied");
      if (el !== null) {
        el.textContent = (Number.parseInt(el.textContent || "0", 10) + 1) + " denied";
        el.className = "badge bad";
      }
    }
  };
  source.addEventListener("open", () => { status.textContent = "live: following new entries"; });
  source.addEventListener("overview", (event) => {
    const data = JSON.parse(event.data);
    if (overview === null) return;
    const last = data.last === null ? -1 : data.last;
    if (last < counted && data.stopped === null) return;
    counted = Math.max(counted, last);
    // The server rendered it with every value escaped, as the page itself.
    overview.innerHTML = data.html;
    overview.dataset.last = String(last);
    if (data.stopped !== null) overview.dataset.stopped = "true";
    windowText(data.entries);
  });
  source.addEventListener("entry", (event) => {
    const data = JSON.parse(event.data);
    if (document.getElementById("e" + data.sequence) !== null) return;
    lastRow = Math.max(lastRow, data.sequence);
    const total = document.getElementById("count-entries");
    // A call's decision or outcome: its row, sent again whole, replaces the one shown.
    const shown = data.replace === null || data.replace === undefined ? null : document.getElementById("e" + data.replace);
    if (shown !== null && shown.tagName === "TR") {
      shown.outerHTML = data.html;
      filters.add(document.getElementById("e" + data.replace));
      count(data);
      windowText(total === null ? "?" : total.textContent);
      status.dataset.last = String(data.sequence);
      return;
    }
    const none = document.getElementById("no-entries");
    if (none !== null) none.remove();
    // The row is HTML the server rendered with every value escaped.
    body.insertAdjacentHTML("beforeend", data.html);
    filters.add(body.lastElementChild);
    count(data);
    windowText(total === null ? "?" : total.textContent);
    status.textContent = "live: last entry " + data.sequence + " at " + new Date().toISOString();
    status.dataset.last = String(data.sequence);
  });
  source.addEventListener("failure", (event) => {
    const message = JSON.parse(event.data).message;
    status.textContent = "live: stopped (" + message + ")";
    status.dataset.stopped = "true";
    // What the header shows stops where the rows stopped: say so above it.
    if (overview !== null && document.getElementById("live-stopped") === null) {
      const p = document.createElement("p");
      p.id = "live-stopped";
      const badge = document.createElement("span");
      badge.className = "badge bad";
      badge.textContent = "NOT FOLLOWED";
      p.append(badge, " " + message + ". What is shown stops where following stopped; nothing stored after is vouched for on this page. Reload it to verify the session again.");
      overview.prepend(p);
      overview.dataset.stopped = "true";
    }
    source.close();
  });
  source.addEventListener("error", () => { status.textContent = "live: reconnecting…"; });
})();
(() => {
  const list = document.getElementById("session-list");
  const status = document.getElementById("list-status");
  if (list === null || list.dataset.live === undefined) return;
  // Finds a session by its id, and a story by any of its ids (the agent
  // session's or any of its journal sessions'): the whole story is shown.
  const search = document.getElementById("list-filter");
  const shown = document.getElementById("list-shown");
  const filter = () => {
    if (search === null) return;
    const q = search.value.trim().toLowerCase();
    const has = (id) => (id || "").toLowerCase().includes(q);
    let n = 0, total = 0;
    for (const body of list.querySelectorAll("#sessions > tbody")) {
      const rows = [...body.querySelectorAll("tr[data-id]")];
      if (body.classList.contains("story")) {
        const found = q === "" || has(body.dataset.story) || rows.some((row) => has(row.dataset.id));
        body.hidden = !found;
        for (const row of rows) row.hidden = false;
        total += rows.length;
        if (found) n += rows.length;
        continue;
      }
      for (const row of rows) {
        row.hidden = q !== "" && !has(row.dataset.id);
        total++;
        if (!row.hidden) n++;
      }
    }
    if (shown !== null) shown.textContent = q === "" ? "" : n + " of " + total + " sessions shown";
    list.dataset.shown = String(n);
  };
  if (search !== null) {
    search.addEventListener("input", filter);
    search.form?.addEventListener("submit", (event) => { event.preventDefault(); filter(); });
  }
  filter();
  const source = new EventSource(list.dataset.live);
  source.addEventListener("open", () => { if (status !== null) status.textContent = "live: following the journal"; });
  source.addEventListener("sessions", (event) => {
    const data = JSON.parse(event.data);
    // The server rendered the list with every value escaped.
    list.innerHTML = data.html;
    list.dataset.count = String(data.count);
    filter();
    if (status !== null) status.textContent = "live: list as of " + new Date().toISOString();
  });
  source.addEventListener("failure", (event) => {
    if (status !== null) status.textContent = "live: stopped (" + JSON.parse(event.data).message + ")";
    source.close();
  });
  source.addEventListener("error", () => { if (status !== null) status.textContent = "live: reconnecting…"; });
})();
`
