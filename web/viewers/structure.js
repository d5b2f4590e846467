/*
 * The structure viewer (PDB, mmCIF): 3Dmol.js (BSD, 0.5 MB — Mol* would be ten times the
 * bytes for a link that opens one file), cartoon by default, coloured by chain, B-factor or
 * pLDDT (AlphaFold's bands, read from the B-factor column), residue labels on hover.
 */
(function () {
  "use strict";
  var O = window.Operon;
  var PLDDT = [[90, "#0053d6"], [70, "#65cbf3"], [50, "#ffdb13"], [-Infinity, "#ff7d45"]];

  O.meta().then(function (m) {
    return fetch(O.url(m.data.primary), { credentials: "omit" }).then(function (r) {
      if (!r.ok) throw new Error("the file could not be read (" + r.status + ")");
      return r.text();
    }).then(function (text) {
      O.clear();
      var bar = O.el("div", { class: "toolbar" });
      var colour = O.el("select", { id: "colour-by", "aria-label": "Colour by" });
      [["chain", "Colour by chain"], ["b", "Colour by B-factor"], ["plddt", "Colour by pLDDT"], ["spectrum", "Rainbow (N→C)"]].forEach(function (o) { colour.appendChild(O.el("option", { value: o[0], text: o[1] })); });
      var style = O.el("select", { id: "style", "aria-label": "Style" });
      [["cartoon", "Cartoon"], ["stick", "Sticks"], ["sphere", "Spheres"]].forEach(function (o) { style.appendChild(O.el("option", { value: o[0], text: o[1] })); });
      var info = O.el("span", { class: "facts", id: "structure-facts" });
      var hover = O.el("span", { id: "hover-label", "aria-live": "polite" });
      bar.appendChild(colour); bar.appendChild(style); bar.appendChild(info); bar.appendChild(hover);
      O.main.appendChild(bar);
      var host = O.el("div", { id: "mol", style: "position:relative;width:100%;height:calc(100vh - 140px);min-height:320px" });
      O.main.appendChild(host);
      var viewer = $3Dmol.createViewer(host, { backgroundColor: "white", antialias: true });
      if (!viewer) throw new Error("this browser cannot draw 3D (WebGL is off)");
      var model = viewer.addModel(text, m.structure.format === "cif" ? "cif" : "pdb", { keepH: true });
      var atoms = model.selectedAtoms({});
      if (!atoms.length) throw new Error("no atoms were found in this file");
      var chains = {}, residues = {}, bmin = Infinity, bmax = -Infinity;
      atoms.forEach(function (a) { chains[a.chain] = 1; residues[a.chain + ":" + a.resi] = 1; if (isFinite(a.b)) { bmin = Math.min(bmin, a.b); bmax = Math.max(bmax, a.b); } });
      var hasCartoon = atoms.some(function (a) { return a.atom === "CA" && !a.hetflag; });
      // One chain in one colour says nothing: a rainbow from N to C terminus does.
      if (Object.keys(chains).length === 1) colour.value = "spectrum";

      function colourSpec() {
        var c = colour.value;
        if (c === "chain") return { colorscheme: "chain" };
        if (c === "spectrum") return { color: "spectrum" };
        if (c === "b") return { colorscheme: { prop: "b", gradient: "rwb", min: bmax, max: bmin } };
        return { colorfunc: function (a) { for (var i = 0; i < PLDDT.length; i++) if (a.b > PLDDT[i][0]) return PLDDT[i][1]; return PLDDT[3][1]; } };
      }
      function apply() {
        var s = {};
        var kind = style.value === "cartoon" && !hasCartoon ? "stick" : style.value;
        s[kind] = colourSpec();
        viewer.setStyle({}, s);
        if (kind === "cartoon") viewer.setStyle({ hetflag: true }, { stick: Object.assign({ radius: 0.2 }, colourSpec()) });
        viewer.render();
      }
      colour.addEventListener("change", apply);
      style.addEventListener("change", apply);
      var label = null;
      viewer.setHoverable({}, true, function (atom) {
        var text = atom.resn + " " + atom.resi + " · chain " + atom.chain + " · " + atom.atom + " · B " + atom.b;
        hover.textContent = text;
        if (label) viewer.removeLabel(label);
        label = viewer.addLabel(atom.resn + atom.resi + " (" + atom.chain + ")", { position: atom, backgroundColor: "#1f2933", fontColor: "white", fontSize: 12, backgroundOpacity: 0.8 });
      }, function () { if (label) { viewer.removeLabel(label); label = null; } hover.textContent = ""; });
      apply();
      viewer.zoomTo();
      viewer.render();
      var nChains = Object.keys(chains).length, nRes = Object.keys(residues).length;
      info.textContent = atoms.length.toLocaleString() + " atoms · " + nRes.toLocaleString() + " residues · " + nChains + " chain" + (nChains === 1 ? "" : "s");
      window.operonMol = viewer;
      window.addEventListener("resize", function () { viewer.resize(); viewer.render(); });
      O.ready({ atoms: atoms.length, chains: nChains, residues: nRes });
    });
  }).catch(O.fail);
})();
