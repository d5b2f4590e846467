/*
 * The variant viewer (VCF, BCF): igv.js with one variant track, on the file's own contigs
 * (chromosome sizes from the server: never a genome from the internet) or on the link's
 * reference FASTA. Reports the variants igv.js loaded for the locus shown.
 */
(function () {
  "use strict";
  var O = window.Operon;

  O.meta().then(function (m) {
    O.clear();
    var track = { type: "variant", format: "vcf", name: O.page.name, url: O.abs(m.data.primary), displayMode: "EXPANDED", visibilityWindow: 1000000, indexed: !!(m.track && m.track.indexed) };
    if (track.indexed) track.indexURL = O.abs(m.data["primary-index"]);
    return O.igvBrowser(m, [track]).then(function (browser) {
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
