/*
 * Shared by every Operon viewer page (served from /view/assets/, no build step): reads the
 * page's facts, fetches the link's prepared metadata, and reports the viewer's state on
 * `window.operonViewer` ({kind, ready, error, counts, firstPaintMs}) for people (a readable
 * error instead of a blank page) and for the browser tests.
 */
(function () {
  "use strict";
  var page = JSON.parse(document.getElementById("operon-page").textContent);
  var started = performance.now();
  var state = { kind: page.kind, ready: false, error: null, counts: {}, firstPaintMs: null };
  window.operonViewer = state;
  var main = document.getElementById("viewer");

  function url(rel) { return encodeURIComponent(page.token) + "/" + rel; }
  function abs(rel) { return new URL(url(rel), location.href).href; }

  /**
   * The genome igv.js pages show: the link's reference FASTA (or the file itself, for a
   * FASTA; a bgzip one with its .gzi), else the file's own contigs as chromosome sizes —
   * never a genome from elsewhere.
   */
  function igvReference(m) {
    if (m.genome && m.genome.kind === "fasta") {
      var own = !m.data.reference;
      var ref = { id: m.genome.name, name: m.genome.name, fastaURL: abs(own ? m.data.primary : m.data.reference), indexURL: abs(own ? m.data["primary-index"] : m.data["reference-index"]), wholeGenomeView: false };
      // A bgzip FASTA is read compressed, through its .gzi (block offsets).
      var gzi = own ? m.data["primary-gzi"] : m.data["reference-gzi"];
      if (gzi) ref.compressedIndexURL = abs(gzi);
      return ref;
    }
    return { id: "contigs of " + page.name, name: page.name + " contigs", format: "chromsizes", fastaURL: abs("chrom.sizes"), url: abs("chrom.sizes"), wholeGenomeView: false };
  }

  /** An igv.js browser in a fresh host element under the toolbar (if any). */
  function igvBrowser(m, tracks) {
    var host = el("div", { class: "igv-host", id: "igv" });
    main.appendChild(host);
    return window.igv.createBrowser(host, { loadDefaultGenomes: false, reference: igvReference(m), locus: m.locus, tracks: tracks, showSVGButton: false, promisified: true })
      .then(function (browser) { window.operonIgv = browser; return browser; });
  }

  function fetchJson(rel) {
    return fetch(url(rel), { credentials: "omit" }).then(function (r) {
      return r.json().catch(function () { return {}; }).then(function (body) {
        if (!r.ok) throw new Error(body && body.message ? body.message : "the server answered " + r.status);
        return body.data;
      });
    });
  }

  function el(tag, attrs, children) {
    var e = document.createElement(tag);
    if (attrs) Object.keys(attrs).forEach(function (k) {
      if (k === "text") e.textContent = attrs[k];
      else if (k === "class") e.className = attrs[k];
      else e.setAttribute(k, attrs[k]);
    });
    (children || []).forEach(function (c) { if (c) e.appendChild(typeof c === "string" ? document.createTextNode(c) : c); });
    return e;
  }

  function fail(err) {
    var message = err && err.message ? err.message : String(err);
    state.error = message;
    main.setAttribute("aria-busy", "false");
    main.innerHTML = "";
    main.appendChild(el("div", { class: "error", role: "alert" }, [el("h2", { text: "This file cannot be shown" }), el("p", { text: message })]));
  }

  function ready(counts) {
    state.counts = counts || {};
    main.setAttribute("aria-busy", "false");
    requestAnimationFrame(function () {
      state.firstPaintMs = Math.round(performance.now() - started);
      state.ready = true;
    });
  }

  function notes(list) {
    var f = document.getElementById("notes");
    if (!f || !list || !list.length) return;
    f.textContent = "Prepared on the server: " + list.join("; ") + ".";
  }

  // The expiry in the reader's own time zone.
  var exp = document.querySelector(".expiry");
  if (exp) {
    var d = new Date(exp.getAttribute("data-expires"));
    exp.textContent = "link expires " + d.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
  }

  function clear() { main.innerHTML = ""; }

  window.Operon = { page: page, url: url, abs: abs, igvBrowser: igvBrowser, fetchJson: fetchJson, el: el, fail: fail, ready: ready, notes: notes, clear: clear, main: main,
    meta: function () { return fetchJson("meta").then(function (m) { notes(m.notes); return m; }); } };
  window.addEventListener("error", function (e) { if (!state.ready && !state.error) fail(e.error || e.message); });
  window.addEventListener("unhandledrejection", function (e) { if (!state.ready && !state.error) fail(e.reason); });
})();
