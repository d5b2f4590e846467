/**
 * Viewer links as a service (spec: Visualizations; docs/viewers.md): the checks and the signed
 * grant behind `POST /v1/visualizations/viewer-url`, shared with the assistant's viewer tool.
 */
import { detectViewer, KNOWN_EXTENSIONS, parseRegion, VIEWER_FORMATS, type FileGrant, type ViewerFormat } from "../core/viewers.js";
import type { Clock, ObjectStore } from "../core/ports.js";
import { OperonError, badRequest } from "../core/errors.js";
import { fileKey, type AuthContext, type WorkspaceAccess } from "./access.js";
import { signGrant } from "./viewer-token.js";

export interface ViewerLinkDeps { store: ObjectStore; access: WorkspaceAccess; clock: Clock; publicUrl: string; signingSecret: string }

export interface ViewerLinkInput {
  workspace_id: string;
  file_path?: string | undefined;
  file_key?: string | undefined;
  format?: string | undefined;
  expires_in: number;
  reference?: string | undefined;
  region?: string | undefined;
}

/** A signed link to one workspace file (with its index and reference), and the grant it carries. */
export async function createViewerLink(deps: ViewerLinkDeps, auth: AuthContext, b: ViewerLinkInput) {
  const { store, access, clock } = deps;
  const given = b.file_path ?? b.file_key;
  const field = b.file_path !== undefined ? "file_path" : "file_key";
  if (!given) throw badRequest("file_path", "is required");
  let format: ViewerFormat | undefined;
  if (b.format !== undefined) {
    if (!(VIEWER_FORMATS as readonly string[]).includes(b.format)) throw new OperonError("invalid_request", `format: must be one of ${VIEWER_FORMATS.join(", ")}`, { field: "format", valid_values: [...VIEWER_FORMATS] });
    format = b.format as ViewerFormat;
  }
  const ws = await access.workspace(auth, b.workspace_id);
  const { key, storageKey } = fileKey(ws, field, given);
  const detected = detectViewer(key, format);
  if (!detected) {
    throw new OperonError("invalid_request", `format: no viewer for ${JSON.stringify(key.split("/").pop())}; give \`format\` (one of ${VIEWER_FORMATS.join(", ")}) or use a known extension (${KNOWN_EXTENSIONS.join(" ")})`, { field: "format", valid_values: [...VIEWER_FORMATS] });
  }
  let region: string | undefined;
  if (b.region !== undefined) {
    const p = parseRegion(b.region);
    if ("error" in p) throw badRequest("region", p.error);
    region = `${p.chr}:${p.start}-${p.end}`;
  }
  let reference: string | undefined;
  if (b.reference !== undefined) {
    const ref = fileKey(ws, "reference", b.reference);
    const d = detectViewer(ref.key);
    if (d?.subtype !== "fasta") throw badRequest("reference", "must be a FASTA file (.fa, .fasta, .fna, optionally .gz)");
    if (!(await store.head(ref.storageKey))) throw new OperonError("not_found", `reference ${JSON.stringify(ref.key)} not found`, { field: "reference" });
    reference = ref.key;
  }
  if (detected.subtype === "cram" && !reference) throw badRequest("reference", "a CRAM file is shown with its reference FASTA: give `reference`");
  if (!(await store.head(storageKey))) throw new OperonError("not_found", `file ${JSON.stringify(key)} not found`, { field });
  const exp = Math.floor(clock.now() / 1000) + b.expires_in;
  const grant: FileGrant = { v: 1, o: ws.organization, w: ws.id, k: key, f: detected.format, exp, ...(reference ? { r: reference } : {}), ...(region ? { g: region } : {}) };
  const token = signGrant(deps.signingSecret, grant);
  return { grant, link: { viewer_url: `${deps.publicUrl}/view/${token}`, format: detected.format, expires_in: b.expires_in, expires_at: new Date(exp * 1000).toISOString() } };
}
