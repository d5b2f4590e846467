/*
 * The table viewer (CSV, TSV, TXT): the server parses, sorts and filters; the page shows one
 * page of rows at a time (never the whole file), numbers right-aligned, headers sortable,
 * a filter box (`text`, `column:text`, `column<0.05`).
 */
(function () {
  "use strict";
  var O = window.Operon;
  var state = { offset: 0, limit: 100, sort: null, dir: "asc", filter: "" };

  O.meta().then(function (m) {
    var t = m.table;
    O.clear();
    var bar = O.el("div", { class: "toolbar" });
    var filter = O.el("input", { type: "search", id: "table-filter", placeholder: t.sortable ? "Filter: text, column:text, padj<0.05" : "Filtering needs a smaller file", "aria-label": "Filter rows" });
    if (!t.sortable) filter.disabled = true;
    var prev = O.el("button", { type: "button", id: "prev-page", text: "‹ Previous" });
    var next = O.el("button", { type: "button", id: "next-page", text: "Next ›" });
    var where = O.el("span", { id: "row-range", class: "facts" });
    bar.appendChild(filter); bar.appendChild(prev); bar.appendChild(next); bar.appendChild(where);
    O.main.appendChild(bar);
    var wrap = O.el("div", { class: "table-wrap" });
    var table = O.el("table", { class: "data", id: "data-table" });
    var thead = O.el("thead"), tbody = O.el("tbody");
    var tr = O.el("tr");
    t.header.forEach(function (h, i) {
      var th = O.el("th", { scope: "col", "data-col": String(i), class: t.types[i] === "number" ? "num" : "" , title: t.sortable ? "Sort by " + h : h}, [h]);
      if (t.sortable) th.addEventListener("click", function () {
        if (state.sort === i) state.dir = state.dir === "asc" ? "desc" : "asc"; else { state.sort = i; state.dir = "asc"; }
        state.offset = 0; load();
      });
      tr.appendChild(th);
    });
    thead.appendChild(tr); table.appendChild(thead); table.appendChild(tbody); wrap.appendChild(table);
    O.main.appendChild(wrap);

    var first = true, timer = null;
    filter.addEventListener("input", function () { clearTimeout(timer); timer = setTimeout(function () { state.filter = filter.value.trim(); state.offset = 0; load(); }, 250); });
    prev.addEventListener("click", function () { state.offset = Math.max(0, state.offset - state.limit); load(); });
    next.addEventListener("click", function () { state.offset += state.limit; load(); });

    function load() {
      var q = "rows?offset=" + state.offset + "&limit=" + state.limit + "&dir=" + state.dir;
      if (state.sort !== null) q += "&sort=" + state.sort;
      if (state.filter) q += "&filter=" + encodeURIComponent(state.filter);
      return O.fetchJson(q).then(function (p) {
        tbody.innerHTML = "";
        p.rows.forEach(function (r) {
          var row = O.el("tr");
          for (var i = 0; i < t.header.length; i++) row.appendChild(O.el("td", { class: t.types[i] === "number" ? "num" : "" }, [r[i] === undefined ? "" : r[i]]));
          tbody.appendChild(row);
        });
        Array.prototype.forEach.call(thead.querySelectorAll("th"), function (th) {
          var i = Number(th.getAttribute("data-col"));
          th.setAttribute("aria-sort", state.sort === i ? (state.dir === "asc" ? "ascending" : "descending") : "none");
        });
        var total = p.filtered !== null ? p.filtered : null;
        var end = state.offset + p.rows.length;
        where.textContent = p.rows.length ? "rows " + (state.offset + 1).toLocaleString() + "–" + end.toLocaleString() + (total !== null ? " of " + total.toLocaleString() : "") + (p.total !== null && total !== p.total ? " (filtered from " + p.total.toLocaleString() + ")" : "") : "no rows match";
        prev.disabled = state.offset === 0;
        next.disabled = total !== null ? end >= total : p.rows.length < state.limit;
        window.operonViewer.counts = { rows: p.rows.length, totalRows: p.total, filteredRows: p.filtered, columns: t.header.length };
        if (first) { first = false; O.ready(window.operonViewer.counts); }
      }).catch(O.fail);
    }
    return load();
  }).catch(O.fail);
})();
