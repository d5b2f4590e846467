/*
 * The sequence viewer (FASTA): igv.js on the file itself as the reference (its `.fai` built
 * on the server when missing), with a picker of the file's sequences and their lengths.
 */
(function () {
  "use strict";
  var O = window.Operon;

  O.meta().then(function (m) {
    O.clear();
    var seqs = m.sequences || [];
    var bar = O.el("div", { class: "toolbar" });
    var picker = O.el("select", { id: "sequence-picker", "aria-label": "Sequence" });
    seqs.forEach(function (s) { picker.appendChild(O.el("option", { value: s.name, text: s.name + " (" + s.length.toLocaleString() + " bp)" })); });
    bar.appendChild(O.el("label", { for: "sequence-picker", text: (m.stats ? m.stats.sequences.toLocaleString() : seqs.length) + " sequence(s)" }));
    bar.appendChild(picker);
    O.main.appendChild(bar);
    return O.igvBrowser(m, []).then(function (browser) {
      picker.addEventListener("change", function () {
        var s = seqs.find(function (x) { return x.name === picker.value; });
        browser.search(s.name + ":1-" + Math.min(s.length, 10000));
      });
      var frame = browser.referenceFrameList[0];
      return browser.genome.getSequence(frame.chr, Math.floor(frame.start), Math.floor(frame.start) + 100).then(function (bases) {
        O.ready({ sequences: m.stats ? m.stats.sequences : seqs.length, basesShown: bases ? bases.length : 0, firstBases: bases ? bases.slice(0, 20) : "" });
      });
    });
  }).catch(O.fail);
})();
