/*
 * The alignment viewer (BAM, SAM, CRAM): igv.js with a coverage and alignment track over the
 * file's index (built on the server when missing), opening on the first covered region.
 * Reports the alignments igv.js loaded that overlap the locus shown.
 */
(function () {
  "use strict";
  var O = window.Operon;

  O.meta().then(function (m) {
    O.clear();
    if (!m.locus) throw new Error("no read in this file is mapped to a reference sequence");
    var track = { type: "alignment", format: m.track.format, name: O.page.name, url: O.abs(m.data.primary), indexURL: O.abs(m.data["primary-index"]), showCoverage: true, displayMode: "EXPANDED" };
    return O.igvBrowser(m, [track]).then(function (browser) {
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
