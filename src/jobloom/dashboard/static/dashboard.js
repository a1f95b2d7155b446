// jobloom dashboard: charts (uPlot) fed by the overview's live part, "select all" on the jobs page, scroll
// hints, and the action forms' JSON checks.
(function () {
  "use strict";
  var charts = {};
  window.jobloomCharts = charts;  // the drawn charts, for the browser tests to read their axes

  function css(name) { return getComputedStyle(document.documentElement).getPropertyValue(name).trim(); }

  function chartData() {
    var node = document.getElementById("chart-data");
    return node ? JSON.parse(node.textContent) : null;
  }

  function series(kind) {
    if (kind === "throughput") {
      return [{value: function (u, v) { return v == null ? "—" : utc(v, "full"); }}, {label: "succeeded / " + (chartData() || {}).per, stroke: css("--ok"), width: 2},
              {label: "failed", stroke: css("--danger"), width: 2},
              {label: "started", stroke: css("--info"), width: 1}];
    }
    var fmt = function (u, v) { return v == null ? "—" : (v < 1 ? (v * 1000).toPrecision(3) + " ms" : v.toPrecision(3) + " s"); };
    return [{value: function (u, v) { return v == null ? "—" : utc(v, "full"); }}, {label: "p50", stroke: css("--ok"), width: 2, value: fmt, points: {show: true, size: 5}},
            {label: "p90", stroke: css("--warn"), width: 2, value: fmt, points: {show: true, size: 5}},
            {label: "p99", stroke: css("--danger"), width: 2, value: fmt, points: {show: true, size: 5}}];
  }

  function pad(n) { return (n < 10 ? "0" : "") + n; }

  // A moment in UTC, ISO style: "14:05" within a day, "12-05 14:05" across days, the date and time in full
  // for the legend ("2026-12-05 14:05 UTC").
  function utc(ts, span) {
    var d = new Date(ts * 1000);
    var hm = pad(d.getUTCHours()) + ":" + pad(d.getUTCMinutes());
    if (span === "full") { return d.getUTCFullYear() + "-" + pad(d.getUTCMonth() + 1) + "-" + pad(d.getUTCDate()) + " " + hm + " UTC"; }
    return span > 86400 ? pad(d.getUTCMonth() + 1) + "-" + pad(d.getUTCDate()) + " " + hm : hm;
  }

  function xAxisValues(u, splits) {
    var span = u.scales.x.max - u.scales.x.min;
    return splits.map(function (ts) { return utc(ts, span); });
  }

  function rows(kind, d) {
    return kind === "throughput" ? [d.x, d.succeeded, d.failed, d.started] : [d.x, d.p50, d.p90, d.p99];
  }

  function draw() {
    if (typeof uPlot === "undefined") { return; }
    var d = chartData();
    if (!d) { return; }
    document.querySelectorAll("[data-chart]").forEach(function (el) {
      var kind = el.getAttribute("data-chart");
      var data = rows(kind, d);
      var width = Math.max(280, el.clientWidth - 8);
      var existing = charts[kind];
      if (existing && existing.root.parentNode === el) {
        existing.setData(data);
        if (Math.abs(existing.width - width) > 4) { existing.setSize({width: width, height: 200}); }
        return;
      }
      el.innerHTML = "";
      var axis = {stroke: css("--muted"), grid: {stroke: css("--line")}, ticks: {stroke: css("--line")}};
      var x = Object.assign({}, axis, {values: xAxisValues, space: 70});
      var y = Object.assign({}, axis, {size: 64});  // wide enough for "1.2 ms" or "12k", never clipped
      if (kind !== "throughput") {
        y.values = function (u, vals) { return vals.map(function (v) { return v == null ? "" : (v < 1 ? +(v * 1000).toPrecision(2) + " ms" : +v.toPrecision(2) + " s"); }); };
      }
      charts[kind] = new uPlot({width: width, height: 200, series: series(kind), axes: [x, y],
                                scales: {x: {time: true, range: function (u, lo, hi) { var c = chartData(); return c ? c.range : [lo, hi]; }}}, tzDate: function (ts) { return uPlot.tzDate(new Date(ts * 1000), "Etc/UTC"); }},
                               data, el);
    });
  }

  // A table wider than its panel scrolls sideways: say so, and shade the edge where more columns are.
  function scrollHints() {
    document.querySelectorAll("[data-scroll]").forEach(function (el) {
      var over = el.scrollWidth > el.clientWidth + 1;
      el.classList.toggle("overflowing", over);
      var hint = el.querySelector(".scroll-hint");
      if (hint) { hint.hidden = !over; }
    });
  }

  // The action forms: JSON checked as it is typed, and a payload against the top of its binding's JSON
  // Schema (type, required properties, their types); the server checks it all again before acting.
  var TYPES = {string: "string", integer: "number", number: "number", boolean: "boolean", array: "object", object: "object"};

  function schemaProblem(schema, value) {
    if (!schema || typeof schema !== "object") { return ""; }
    if (schema.type === "object" && (value === null || typeof value !== "object" || Array.isArray(value))) { return "a JSON object is expected"; }
    if (schema.type === "array" && !Array.isArray(value)) { return "a JSON array is expected"; }
    if (schema.type !== "object" || value === null || typeof value !== "object") { return ""; }
    var missing = (schema.required || []).filter(function (k) { return !(k in value); });
    if (missing.length) { return "missing: " + missing.join(", "); }
    var props = schema.properties || {};
    for (var key in value) {
      var p = props[key];
      if (!p || !p.type || value[key] === null) { continue; }
      var ok = typeof value[key] === TYPES[p.type] && (p.type !== "integer" || Number.isInteger(value[key])) &&
               (p.type !== "array" || Array.isArray(value[key]));
      if (!ok) { return key + ": " + p.type + " expected"; }
    }
    return "";
  }

  function schemas() {
    var node = document.getElementById("schemas");
    return node ? JSON.parse(node.textContent) : {};
  }

  function checkJson() {
    document.querySelectorAll("textarea[data-json]").forEach(function (area) {
      var out = document.getElementById("json-problem"), problem = "";
      var value = null;
      try { value = area.value.trim() ? JSON.parse(area.value) : {}; } catch (e) { problem = "not JSON: " + e.message; }
      var select = document.querySelector("[data-schema-select]");
      if (!problem && select) { problem = schemaProblem(schemas()[select.value], value); }
      area.setCustomValidity(problem);
      if (out) { out.textContent = problem; }
    });
  }

  function showSchema() {
    var select = document.querySelector("[data-schema-select]"), pre = document.getElementById("schema");
    if (!select || !pre) { return; }
    var schema = schemas()[select.value];
    pre.textContent = schema ? JSON.stringify(schema, null, 2) : "no schema: any JSON";
    document.getElementById("schema-name").textContent = select.value;
  }

  function selectAll(event) {
    var box = event.target;
    if (!box.matches("[data-select-all]")) { return; }
    document.querySelectorAll("input[name=ids]").forEach(function (c) { c.checked = box.checked; });
    updateCount();
  }

  function updateCount() {
    var out = document.getElementById("selected-count");
    if (!out) { return; }
    out.textContent = document.querySelectorAll("input[name=ids]:checked").length + " selected";
  }

  document.addEventListener("change", function (event) {
    selectAll(event);
    if (event.target.name === "ids") { updateCount(); }
    if (event.target.matches("[data-schema-select]")) { showSchema(); checkJson(); }
  });
  document.addEventListener("input", function (event) { if (event.target.matches("textarea[data-json]")) { checkJson(); } });
  function refresh() { draw(); scrollHints(); checkJson(); }
  document.addEventListener("DOMContentLoaded", refresh);
  document.addEventListener("htmx:afterSettle", refresh);
  window.addEventListener("resize", refresh);
})();
