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

  window.Operon = { page: page, url: url, fetchJson: fetchJson, el: el, fail: fail, ready: ready, notes: notes, clear: clear, main: main,
    meta: function () { return fetchJson("meta").then(function (m) { notes(m.notes); return m; }); } };
  window.addEventListener("error", function (e) { if (!state.ready && !state.error) fail(e.error || e.message); });
  window.addEventListener("unhandledrejection", function (e) { if (!state.ready && !state.error) fail(e.reason); });
})();
