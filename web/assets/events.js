// srq dashboard: the live tail of a queue's events. It polls the events API after the newest
// event shown and adds what came, newest first. No framework; it only sets textContent.
(function () {
  "use strict";
  var table = document.getElementById("events");
  if (!table) return;
  var body = table.tBodies[0];
  var src = table.getAttribute("data-src");
  var next = table.getAttribute("data-next");
  var interval = Math.max(250, parseInt(table.getAttribute("data-interval"), 10) || 2000);
  var status = document.getElementById("events-status");
  var maxRows = 500;

  function cell(tr, text, cls) {
    var td = document.createElement("td");
    if (cls) td.className = cls;
    td.textContent = text;
    tr.appendChild(td);
    return td;
  }

  function utc(ms) {
    var s = new Date(ms).toISOString(); // 2006-01-02T15:04:05.000Z
    return s.slice(0, 10) + " " + s.slice(11, 23) + " UTC";
  }

  function row(ev) {
    var tr = document.createElement("tr");
    tr.setAttribute("data-kind", ev.kind);
    tr.setAttribute("data-id", ev.id);
    tr.setAttribute("data-position", ev.position);
    tr.className = "new";
    cell(tr, utc(Date.parse(ev.time)), "mono");
    var kind = cell(tr, "");
    var badge = document.createElement("span");
    badge.className = "badge ev-" + ev.kind;
    badge.textContent = ev.kind;
    kind.appendChild(badge);
    cell(tr, ev.id, "id");
    cell(tr, ev.partition, "key");
    var details = [];
    if (ev.step) details.push("step " + ev.step);
    if (ev.delay_ms) details.push("delay " + ev.delay_ms + "ms");
    if (ev.wait === "children") details.push("waits for its children");
    else if (ev.wait === "signal") details.push("waits for signal " + ev.signal);
    else if (ev.signal) details.push("signal " + ev.signal);
    if (ev.progress !== null && ev.progress !== undefined) details.push("progress " + JSON.stringify(ev.progress));
    if (ev.error) details.push(ev.error);
    cell(tr, details.join(" "), "err");
    return tr;
  }

  function show(text) { if (status) status.textContent = text; }

  function poll() {
    fetch(src + "&after=" + encodeURIComponent(next), { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) {
        if (!r.ok) throw new Error("HTTP " + r.status);
        return r.json();
      })
      .then(function (page) {
        (page.events || []).forEach(function (ev) { body.insertBefore(row(ev), body.firstChild); });
        while (body.rows.length > maxRows) body.deleteRow(body.rows.length - 1);
        next = page.next;
        table.setAttribute("data-next", next);
        show("live · updated " + new Date().toLocaleTimeString());
      })
      .catch(function (err) { show("refresh failed: " + err.message); })
      .finally(function () { setTimeout(poll, interval); });
  }
  setTimeout(poll, interval);
})();
