/*
 * The variant viewer (VCF, BCF): igv.js with one variant track, on the file's own contigs
 * (chromosome sizes from the server: never a genome from the internet) or on the link's
 * reference FASTA. Reports the variants igv.js loaded for the locus shown.
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
    var track = { type: "variant", format: "vcf", name: O.page.name, url: abs(m.data.primary), displayMode: "EXPANDED", visibilityWindow: 1000000 };
    if (m.track && m.track.indexed) { track.indexURL = abs(m.data["primary-index"]); track.indexed = true; } else track.indexed = false;
    return igv.createBrowser(host, {
      loadDefaultGenomes: false, reference: reference, locus: m.locus, tracks: [track],
      showSVGButton: false, showCursorGuide: true, promisified: true,
    }).then(function (browser) {
      window.operonIgv = browser;
      var t = browser.findTracks(function (x) { return x.type === "variant"; })[0];
      var frame = browser.referenceFrameList[0];
      var start = Math.floor(frame.start), end = Math.ceil(frame.end);
      return t.getFeatures(frame.chr, start, end, frame.bpPerPixel).then(function (features) {
        var n = (features || []).filter(function (f) { return f.end > start && f.start < end; }).length;
        O.ready({ variants: n, locus: frame.chr + ":" + (start + 1) + "-" + end, totalVariants: m.stats ? m.stats.variants : null });
      });
    });
  }).catch(O.fail);
})();
