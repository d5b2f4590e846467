/*
 * The FASTQ read browser (igv.js does not show FASTQ): a summary of the first reads computed
 * on the server (count, length distribution, mean quality by position, GC) and the reads
 * themselves, each base coloured by its quality.
 */
(function () {
  "use strict";
  var O = window.Operon;
  var NS = "http://www.w3.org/2000/svg";
  function svg(tag, attrs) { var e = document.createElementNS(NS, tag); Object.keys(attrs || {}).forEach(function (k) { e.setAttribute(k, attrs[k]); }); return e; }
  function qColour(q) { return q >= 30 ? "#d3f2dc" : q >= 20 ? "#fdeccb" : "#fbd5d1"; }

  function chart(title, values, opts) {
    var W = 360, H = 150, L = 36, B = 22, T = 8, R = 8;
    var box = O.el("figure", { class: "chart" });
    box.appendChild(O.el("figcaption", { text: title }));
    var s = svg("svg", { viewBox: "0 0 " + W + " " + H, width: "100%", role: "img", "aria-label": title });
    var max = opts.max || Math.max.apply(null, values.map(function (v) { return v.y; }).concat([1]));
    var n = values.length || 1;
    var x = function (i) { return L + (i / n) * (W - L - R); };
    var y = function (v) { return H - B - (v / max) * (H - B - T); };
    s.appendChild(svg("line", { x1: L, y1: H - B, x2: W - R, y2: H - B, stroke: "#9aa5b1" }));
    s.appendChild(svg("line", { x1: L, y1: T, x2: L, y2: H - B, stroke: "#9aa5b1" }));
    [0, max / 2, max].forEach(function (v) { var tx = svg("text", { x: L - 4, y: y(v) + 4, "text-anchor": "end", "font-size": 10, fill: "#52606d" }); tx.textContent = Math.round(v); s.appendChild(tx); });
    (opts.guides || []).forEach(function (g) { s.appendChild(svg("line", { x1: L, y1: y(g), x2: W - R, y2: y(g), stroke: "#cbd2d9", "stroke-dasharray": "3 3" })); });
    if (opts.line) {
      s.appendChild(svg("polyline", { points: values.map(function (v, i) { return (x(i) + (W - L - R) / n / 2) + "," + y(v.y); }).join(" "), fill: "none", stroke: "#0b6e99", "stroke-width": 1.5 }));
    } else values.forEach(function (v, i) { s.appendChild(svg("rect", { x: x(i) + 0.5, y: y(v.y), width: Math.max(1, (W - L - R) / n - 1), height: H - B - y(v.y), fill: "#0b6e99" })); });
    var first = svg("text", { x: L, y: H - 6, "font-size": 10, fill: "#52606d" }); first.textContent = values.length ? values[0].label : "";
    var last = svg("text", { x: W - R, y: H - 6, "font-size": 10, fill: "#52606d", "text-anchor": "end" }); last.textContent = values.length ? values[values.length - 1].label : "";
    var xl = svg("text", { x: (W + L) / 2, y: H - 6, "font-size": 10, fill: "#52606d", "text-anchor": "middle" }); xl.textContent = opts.xLabel;
    s.appendChild(first); s.appendChild(last); s.appendChild(xl);
    box.appendChild(s);
    return box;
  }

  O.meta().then(function (m) {
    var f = m.fastq, s = f.summary;
    O.clear();
    var cards = O.el("div", { class: "cards" });
    [["Reads", s.reads.toLocaleString() + (f.complete ? "" : " (first " + f.sampled.toLocaleString() + ")")], ["Mean length", s.meanLength.toFixed(1) + " bp"], ["Length range", s.minLength + "–" + s.maxLength + " bp"], ["Mean quality", "Q" + s.meanQuality.toFixed(1)], ["GC", s.gcPercent.toFixed(1) + " %"], ["Phred offset", String(f.phredOffset)]].forEach(function (c) {
      cards.appendChild(O.el("div", { class: "card" }, [O.el("div", { class: "k", text: c[0] }), O.el("div", { class: "v", text: c[1] })]));
    });
    O.main.appendChild(cards);
    var charts = O.el("div", { class: "charts" });
    charts.appendChild(chart("Read length", s.lengthHistogram.map(function (h) { return { y: h.count, label: String(h.length) }; }), { xLabel: "length (bp)" }));
    charts.appendChild(chart("Mean quality by position", s.meanQualityByPosition.map(function (q, i) { return { y: q, label: String(i + 1) }; }), { line: true, max: 42, guides: [20, 30], xLabel: "position in read" }));
    O.main.appendChild(charts);
    var bar = O.el("div", { class: "toolbar" });
    var prev = O.el("button", { type: "button", id: "prev-page", text: "‹ Previous" });
    var next = O.el("button", { type: "button", id: "next-page", text: "Next ›" });
    var where = O.el("span", { class: "facts", id: "read-range" });
    var legend = O.el("span", { class: "legend" }, [O.el("i", { style: "background:#fbd5d1" }), "Q<20 ", O.el("i", { style: "background:#fdeccb" }), "Q20–29 ", O.el("i", { style: "background:#d3f2dc" }), "Q≥30"]);
    bar.appendChild(prev); bar.appendChild(next); bar.appendChild(where); bar.appendChild(legend);
    O.main.appendChild(bar);
    var list = O.el("div", { class: "reads", id: "reads" });
    O.main.appendChild(list);
    var offset = 0, limit = 50, first = true;
    prev.addEventListener("click", function () { offset = Math.max(0, offset - limit); load(); });
    next.addEventListener("click", function () { offset += limit; load(); });
    function load() {
      return O.fetchJson("reads?offset=" + offset + "&limit=" + limit).then(function (p) {
        list.innerHTML = "";
        p.reads.forEach(function (r) {
          var seq = O.el("div", { class: "seq" });
          for (var i = 0; i < r.seq.length; i++) {
            var q = r.qual.charCodeAt(i) - f.phredOffset;
            var b = O.el("span", { style: "background:" + qColour(q), title: "position " + (i + 1) + ", Q" + q }, [r.seq[i]]);
            seq.appendChild(b);
          }
          list.appendChild(O.el("div", { class: "read" }, [O.el("div", { class: "rname", text: "@" + r.name + " · " + r.seq.length + " bp" }), seq]));
        });
        where.textContent = "reads " + (offset + 1) + "–" + (offset + p.reads.length) + " of " + p.total;
        prev.disabled = offset === 0;
        next.disabled = offset + p.reads.length >= p.total;
        if (first) { first = false; O.ready({ reads: p.reads.length, sampledReads: f.sampled, summaryReads: s.reads }); }
      }).catch(O.fail);
    }
    return load();
  }).catch(O.fail);
})();
