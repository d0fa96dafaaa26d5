// srq dashboard script: confirmations, live counts and the throughput chart.
// No framework and no build step; it only sets textContent, never HTML.
(function () {
  "use strict";

  // Forms and submit buttons with data-confirm ask before they submit (purge, requeue all).
  document.addEventListener("submit", function (ev) {
    var by = ev.submitter && ev.submitter.getAttribute("data-confirm") ? ev.submitter : ev.target;
    var msg = by.getAttribute && by.getAttribute("data-confirm");
    if (msg && !window.confirm(msg)) ev.preventDefault();
  });

  // A "select all" checkbox ticks every checkbox of its form.
  document.querySelectorAll("input[data-select-all]").forEach(function (box) {
    box.addEventListener("change", function () {
      var form = box.getAttribute("form");
      document.querySelectorAll('input[type=checkbox][name=id][form="' + form + '"]').forEach(function (c) {
        c.checked = box.checked;
      });
    });
  });

  var chart = document.getElementById("chart");
  if (!chart) return;

  var SVG = "http://www.w3.org/2000/svg";
  var src = chart.getAttribute("data-src");
  var interval = Math.max(250, parseInt(chart.getAttribute("data-interval"), 10) || 2000);
  var maxPoints = 90;
  var series = [
    { key: "published", cls: "s-published", label: "published/s" },
    { key: "acked", cls: "s-acked", label: "acked/s" },
    { key: "rejected", cls: "s-rejected", label: "retried/s" },
    { key: "dead_lettered", cls: "s-dead", label: "dead-lettered/s" }
  ];
  var prev = null;   // last sample: {t, totals}
  var points = [];   // [{t, rates: {key: per second}}]
  var status = document.getElementById("chart-status");
  window.srqChartPoints = function () { return points.length; };

  function totals(data) {
    var sum = {};
    series.forEach(function (s) { sum[s.key] = 0; });
    (data.queues || []).forEach(function (q) {
      series.forEach(function (s) { sum[s.key] += q[s.key] || 0; });
    });
    return sum;
  }

  // Live counts: every element with data-queue and data-stat shows that field of that queue.
  function updateCounts(data) {
    var byName = {};
    (data.queues || []).forEach(function (q) { byName[q.name] = q; });
    document.querySelectorAll("[data-stat][data-queue]").forEach(function (el) {
      var q = byName[el.getAttribute("data-queue")], field = el.getAttribute("data-stat");
      if (q && field in q) el.textContent = String(q[field]);
    });
  }

  function sample(data) {
    var now = { t: data.server_time, totals: totals(data) };
    if (prev && now.t > prev.t) {
      var dt = (now.t - prev.t) / 1000, rates = {};
      series.forEach(function (s) {
        rates[s.key] = Math.max(0, (now.totals[s.key] - prev.totals[s.key]) / dt);
      });
      points.push({ t: now.t, rates: rates });
      if (points.length > maxPoints) points.shift();
    }
    prev = now;
  }

  function el(name, attrs, text) {
    var e = document.createElementNS(SVG, name);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function niceMax(v) {
    if (v <= 1) return 1;
    var p = Math.pow(10, Math.floor(Math.log10(v))), m = v / p;
    return (m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
  }

  function fmt(v) {
    if (v >= 1e6) return (v / 1e6).toFixed(1) + "M";
    if (v >= 1e3) return (v / 1e3).toFixed(1) + "k";
    return v >= 10 || v === 0 ? String(Math.round(v)) : v.toFixed(1);
  }

  function draw() {
    var w = chart.clientWidth || 800, h = chart.clientHeight || 220;
    var left = 48, right = 10, top = 10, bottom = 22;
    var pw = w - left - right, ph = h - top - bottom;
    chart.setAttribute("viewBox", "0 0 " + w + " " + h);
    while (chart.firstChild) chart.removeChild(chart.firstChild);
    var peak = 0;
    points.forEach(function (p) { series.forEach(function (s) { peak = Math.max(peak, p.rates[s.key]); }); });
    var ymax = niceMax(peak);
    for (var i = 0; i <= 4; i++) {
      var y = top + ph - (ph * i) / 4;
      chart.appendChild(el("line", { "class": "grid", x1: left, x2: left + pw, y1: y, y2: y }));
      chart.appendChild(el("text", { "class": "axis", x: left - 6, y: y + 4, "text-anchor": "end" }, fmt((ymax * i) / 4)));
    }
    var span = (maxPoints * interval) / 1000;
    chart.appendChild(el("text", { "class": "axis", x: left, y: h - 4 }, "-" + Math.round(span) + "s"));
    chart.appendChild(el("text", { "class": "axis", x: left + pw, y: h - 4, "text-anchor": "end" }, "now"));
    if (points.length < 2) {
      chart.appendChild(el("text", { "class": "axis", x: left + pw / 2, y: top + ph / 2, "text-anchor": "middle" },
        "collecting rates…"));
      return;
    }
    series.forEach(function (s) {
      var pts = points.map(function (p, j) {
        var x = left + pw - ((points.length - 1 - j) * pw) / (maxPoints - 1);
        var y = top + ph - (p.rates[s.key] / ymax) * ph;
        return x.toFixed(1) + "," + y.toFixed(1);
      });
      chart.appendChild(el("polyline", { "class": "line " + s.cls, stroke: "currentColor", points: pts.join(" ") }));
    });
  }

  function showStatus(text) { if (status) status.textContent = text; }

  function poll() {
    fetch(src, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) {
        if (!r.ok) throw new Error("HTTP " + r.status);
        return r.json();
      })
      .then(function (data) {
        sample(data);
        updateCounts(data);
        draw();
        var last = points.length ? points[points.length - 1].rates : null;
        showStatus("updated " + new Date(data.server_time).toLocaleTimeString() +
          (last ? " · " + fmt(last.acked) + " acked/s" : ""));
      })
      .catch(function (err) { showStatus("refresh failed: " + err.message); })
      .finally(function () { setTimeout(poll, interval); });
  }

  draw();
  poll();
  window.addEventListener("resize", draw);
})();
