/**
 * What the structure picture's painters share: the molecule, its projection, its colours, the
 * sphere gradients, and the two drawing lists — the molecule itself, and what is drawn over
 * it (highlighted residues).
 */
import type { Molecule } from "../data/molecule.js";
import type { Projection } from "../layout/structure.js";
import type { Gradients, Prim } from "./depth-sort.js";
import type { StructureColours } from "./structure-colours.js";

export interface StructureScene {
  mol: Molecule;
  proj: Projection;
  colours: StructureColours;
  gradients: Gradients;
  prims: Prim[];
  overlay: Prim[];
}
