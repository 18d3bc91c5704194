/* faultload's HTML report: draws the panels described by the JSON in #faultload-charts with uPlot
 * (vendored beside this file), one chart per panel over the same trial-time axis, cursors in step.
 * Fault windows are shaded, violations first seen at a known time are marked with a red line.
 * A chart that cannot be drawn says so in the page (and on the console) instead of leaving a blank. */
(function () {
  "use strict";
  var root = document.documentElement;
  var box = document.getElementById("charts");
  var charts = [];

  function fail(title, err) {
    var p = document.createElement("p");
    p.className = "chart-error";
    p.textContent = "chart " + title + " not drawn: " + err;
    box.appendChild(p);
    console.error("faultload report: chart " + title + ": " + err);
  }

  function overlay(spec) {  // fault windows under the lines, violation marks over them
    function x(u, t) { return u.valToPos(Math.min(Math.max(t, u.scales.x.min), u.scales.x.max), "x", true); }
    return {
      hooks: {
        drawClear: [function (u) {
          var ctx = u.ctx, top = u.bbox.top, height = u.bbox.height;
          ctx.save();
          spec.faults.forEach(function (w) {
            var x0 = x(u, w.start), x1 = x(u, w.end === null ? u.scales.x.max : w.end);
            ctx.fillStyle = w.color;
            ctx.globalAlpha = 0.14;
            ctx.fillRect(x0, top, Math.max(x1 - x0, 1), height);
          });
          ctx.restore();
        }],
        draw: [function (u) {
          var ctx = u.ctx, top = u.bbox.top, height = u.bbox.height;
          ctx.save();
          ctx.strokeStyle = ctx.fillStyle = "#d00";
          ctx.lineWidth = 2 * devicePixelRatio;
          ctx.font = (11 * devicePixelRatio) + "px sans-serif";
          ctx.textAlign = "left";  // uPlot leaves its axes' alignment set
          ctx.textBaseline = "alphabetic";
          spec.marks.forEach(function (m) {
            var at = x(u, m.t);
            ctx.beginPath();
            ctx.moveTo(at, top);
            ctx.lineTo(at, top + height);
            ctx.stroke();
            var w = ctx.measureText(m.label).width, gap = 4 * devicePixelRatio;
            var left = at + gap + w > u.bbox.left + u.bbox.width ? at - gap - w : at + gap;  // kept inside the plot
            ctx.fillText(m.label, left, top + 12 * devicePixelRatio);
          });
          ctx.restore();
        }]
      }
    };
  }

  function series(s) {
    var out = {label: s.label, stroke: s.color, width: 1.5, spanGaps: false};
    if (s.kind === "step") {
      out.paths = uPlot.paths.stepped({align: 1});
    } else if (s.kind === "points") {
      out.paths = function () { return null; };
      out.points = {show: true, size: 5, stroke: s.color, fill: s.color};
    }
    if (s.dash) out.dash = [6, 4];
    return out;
  }

  function yRange(log) {  // an axis even with no value to show (all gaps), so every plot area lines up
    return function (u, min, max) {
      if (min === null || max === null) return log ? [1, 10] : [0, 1];
      return log ? uPlot.rangeLog(min, max, 10, true) : uPlot.rangeNum(min, max, 0.1, true);
    };
  }

  function yAxis(panel) {  // a log axis ticked at its powers of ten (its range runs from one to another)
    var axis = {label: panel.unit, size: 64};
    if (panel.log) {
      axis.splits = function (u, i, min, max) {
        var out = [];
        for (var e = Math.round(Math.log10(min)); e <= Math.round(Math.log10(max)); e++) out.push(Math.pow(10, e));
        return out;
      };
    }
    return axis;
  }

  function draw(spec, panel, width) {
    var el = document.createElement("div");
    el.className = "chart";
    el.id = "chart-" + panel.id;
    box.appendChild(el);
    var opts = {
      title: panel.title,
      width: width,
      height: 160,
      cursor: {sync: {key: "trial"}},
      scales: {x: {time: false, range: [0, spec.end_s]}, y: panel.log ? {distr: 3, range: yRange(true)} : {range: yRange(false)}},
      axes: [panel.id === spec.last ? {label: "trial time (s)", size: 30, labelSize: 20} : {size: 30}, yAxis(panel)],
      series: [{label: "t (s)"}].concat(panel.series.map(series)),
      plugins: [overlay(spec)],
      hooks: {draw: [once(settled)]}
    };
    var data = [panel.x].concat(panel.series.map(function (s) { return s.y; }));
    charts.push(new uPlot(opts, data, el));
  }

  var started = performance.now(), drawn = 0;
  var spec = JSON.parse(document.getElementById("faultload-charts").textContent);
  var pending = spec.panels.length;

  function once(fn) {
    var done = false;
    return function () { if (!done) { done = true; fn(true); } };
  }

  function settled(ok) {  // a chart drawn (or failed): once all are, the page says how many drew and how long
    drawn += ok ? 1 : 0;
    if (--pending === 0) {
      root.setAttribute("data-charts", String(drawn));
      root.setAttribute("data-charts-ms", (performance.now() - started).toFixed(1));
    }
  }

  var width = Math.max(box.clientWidth, 480);
  spec.last = spec.panels.length ? spec.panels[spec.panels.length - 1].id : null;
  spec.panels.forEach(function (panel) {
    try {
      draw(spec, panel, width);
    } catch (err) {
      fail(panel.title, err);
      settled(false);
    }
  });
  window.addEventListener("resize", function () {
    var w = Math.max(box.clientWidth, 480);
    charts.forEach(function (u) { u.setSize({width: w, height: 160}); });
  });
})();
