/**
 * The viewer's only script, served as `/viewer.js`: it follows the session's
 * server-sent events and appends each new entry's row (rendered and escaped by
 * the server) to the timeline, updating the header's counts. Without it the page
 * is complete as of loading.
 *
 * @since 0.3.0
 */

/**
 * The text of `/viewer.js`.
 *
 * @since 0.3.0
 */
export const VIEWER_SCRIPT = `"use strict";
(() => {
  const status = document.getElementById("live-status");
  const body = document.getElementById("live");
  if (status === null || body === null) return;
  const from = Number(status.dataset.from || "0");
  const url = location.pathname.replace(/\\/$/, "") + "/events?from=" + from;
  const source = new EventSource(url);
  const bump = (id, by) => {
    const el = document.getElementById(id);
    if (el !== null) el.textContent = String(Number.parseInt(el.textContent || "0", 10) + by);
  };
  source.addEventListener("open", () => { status.textContent = "live: following new entries"; });
  source.addEventListener("entry", (event) => {
    const data = JSON.parse(event.data);
    if (document.getElementById("e" + data.sequence) !== null) return;
    // A call's decision or outcome: its row, sent again whole, replaces the one shown.
    const shown = data.replace === null || data.replace === undefined ? null : document.getElementById("e" + data.replace);
    if (shown !== null && shown.tagName === "TR") {
      shown.outerHTML = data.html;
      bump("count-entries", 1);
      if (data.kind !== "tool") bump("count-others", 1);
      status.dataset.last = String(data.sequence);
      return;
    }
    const none = document.getElementById("no-entries");
    if (none !== null) none.remove();
    // The row is HTML the server rendered with every value escaped.
    body.insertAdjacentHTML("beforeend", data.html);
    bump("count-entries", 1);
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
    status.textContent = "live: last entry " + data.sequence + " at " + new Date().toISOString();
    status.dataset.last = String(data.sequence);
  });
  source.addEventListener("failure", (event) => {
    status.textContent = "live: stopped (" + JSON.parse(event.data).message + ")";
    source.close();
  });
  source.addEventListener("error", () => { status.textContent = "live: reconnecting…"; });
})();
`
