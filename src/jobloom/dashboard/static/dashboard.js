// jobloom dashboard: charts (uPlot) fed by the overview's live part, and "select all" on the jobs page.
(function () {
  "use strict";
  var charts = {};

  function css(name) { return getComputedStyle(document.documentElement).getPropertyValue(name).trim(); }

  function chartData() {
    var node = document.getElementById("chart-data");
    return node ? JSON.parse(node.textContent) : null;
  }

  function series(kind) {
    if (kind === "throughput") {
      return [{}, {label: "succeeded / min", stroke: css("--ok"), width: 2},
              {label: "failed / min", stroke: css("--danger"), width: 2},
              {label: "started / min", stroke: css("--info"), width: 1}];
    }
    var fmt = function (u, v) { return v == null ? "—" : (v < 1 ? (v * 1000).toPrecision(3) + " ms" : v.toPrecision(3) + " s"); };
    return [{}, {label: "p50", stroke: css("--ok"), width: 2, value: fmt, points: {show: true, size: 5}},
            {label: "p90", stroke: css("--warn"), width: 2, value: fmt, points: {show: true, size: 5}},
            {label: "p99", stroke: css("--danger"), width: 2, value: fmt, points: {show: true, size: 5}}];
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
      var y = kind === "throughput" ? axis : Object.assign({}, axis, {
        values: function (u, vals) { return vals.map(function (v) { return v == null ? "" : (v < 1 ? (v * 1000).toPrecision(2) + " ms" : v.toPrecision(2) + " s"); }); }
      });
      charts[kind] = new uPlot({width: width, height: 200, series: series(kind), axes: [axis, y],
                                scales: {x: {time: true, range: function (u, lo, hi) { var c = chartData(); return c ? c.range : [lo, hi]; }}}, tzDate: function (ts) { return uPlot.tzDate(new Date(ts * 1000), "Etc/UTC"); }},
                               data, el);
    });
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

  document.addEventListener("change", function (event) { selectAll(event); if (event.target.name === "ids") { updateCount(); } });
  document.addEventListener("DOMContentLoaded", draw);
  document.addEventListener("htmx:afterSettle", draw);
  window.addEventListener("resize", draw);
})();
