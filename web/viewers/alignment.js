/*
 * The alignment viewer (BAM, SAM, CRAM): igv.js with a coverage and alignment track over the
 * file's index (built on the server when missing), opening on the first covered region.
 * Reports the alignments igv.js loaded that overlap the locus shown.
 */
(function () {
  "use strict";
  var O = window.Operon;
  var abs = function (rel) { return new URL(O.url(rel), location.href).href; };

  O.meta().then(function (m) {
    O.clear();
    var host = O.el("div", { class: "igv-host", id: "igv" });
    O.main.appendChild(host);
    var reference = m.genome && m.genome.kind === "fasta"
      ? { id: m.genome.name, name: m.genome.name, fastaURL: abs(m.data.reference), indexURL: abs(m.data["reference-index"]) }
      : { id: "contigs of " + O.page.name, name: O.page.name + " contigs", format: "chromsizes", fastaURL: abs("chrom.sizes"), url: abs("chrom.sizes"), wholeGenomeView: false };
    var track = { type: "alignment", format: m.track.format, name: O.page.name, url: abs(m.data.primary), indexURL: abs(m.data["primary-index"]), showCoverage: true, displayMode: "EXPANDED" };
    if (!m.locus) throw new Error("no read in this file is mapped to a reference sequence");
    return igv.createBrowser(host, {
      loadDefaultGenomes: false, reference: reference, locus: m.locus, tracks: [track],
      showSVGButton: false, promisified: true,
    }).then(function (browser) {
      window.operonIgv = browser;
      var t = browser.findTracks(function (x) { return x.type === "alignment"; })[0];
      var frame = browser.referenceFrameList[0];
      var start = Math.floor(frame.start), end = Math.ceil(frame.end);
      return t.getFeatures(frame.chr, start, end, frame.bpPerPixel).then(function (container) {
        var all = container && container.allAlignments ? container.allAlignments() : [];
        var n = all.filter(function (a) { return a.start < end && a.start + a.lengthOnRef > start; }).length;
        O.ready({ alignments: n, locus: frame.chr + ":" + (start + 1) + "-" + end, mappedReads: m.stats ? m.stats.mappedReads : null });
      });
    });
  }).catch(O.fail);
})();
