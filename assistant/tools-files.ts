/**
 * Workspaces and their files as assistant tools: list workspaces, list files, read the head
 * of a text file (capped, with a download link for the rest), create an upload URL (a
 * remote agent cannot read the user's local paths, so the user or their client PUTs the
 * bytes) and confirm the upload once they have. Each handler calls the functions behind the
 * workspaces and files routes.
 */
import { z } from "zod";
import { confirmUpload, createUploadUrl, listFiles, listingRange, readTextHead } from "../services/files.js";
import { READ_ONLY, defineTool, type AssistantTool } from "./registry.js";

/** The most a read returns: larger files come with a download link. */
export const MAX_READ_BYTES = 100 * 1024;
const MAX_LIST = 200;

const workspaceId = z.string().min(1).max(63).describe("The workspace (see service_list_workspaces).");

export const fileTools: AssistantTool[] = [
  defineTool({
    name: "service_list_workspaces",
    title: "List workspaces",
    description: "The workspaces this API key may use. Every file, pipeline and visualization tool takes one of these ids as workspace_id.",
    input: z.object({}).strict(),
    output: z.looseObject({ workspaces: z.array(z.looseObject({ id: z.string() })) }),
    annotations: READ_ONLY,
    scope: "any",
    handler: async (_a, ctx) => ({ workspaces: (await ctx.deps.access.visibleWorkspaces(ctx.auth)).map((w) => ({ id: w.id, name: w.name, created_at: w.created_at })) }),
  }),
  defineTool({
    name: "service_list_files",
    title: "List files",
    description: `Files of a workspace under an optional path prefix (e.g. "reads/" or "pipelines/"), in key order: name, key (the workspace-relative path other tools take), size, last_modified. At most ${MAX_LIST} per call; when has_more is true pass next_cursor back as cursor.`,
    input: z.object({
      workspace_id: workspaceId,
      prefix: z.string().max(1024).optional().describe("Only keys starting with this (a folder ends with /)."),
      limit: z.number().int().min(1).max(MAX_LIST).default(50),
      cursor: z.string().max(2048).optional(),
    }).strict(),
    output: z.looseObject({ files: z.array(z.looseObject({ key: z.string() })), has_more: z.boolean(), next_cursor: z.string().nullable() }),
    annotations: READ_ONLY,
    scope: "files",
    handler: async (a, ctx) => {
      const ws = await ctx.deps.access.workspace(ctx.auth, a.workspace_id);
      const page = await listFiles(ctx.deps.store, ws, listingRange(ws, a), a.limit);
      return { files: page.items.map(({ sha256: _s, ...f }) => f), has_more: page.hasMore, next_cursor: page.nextCursor };
    },
  }),
  defineTool({
    name: "service_read_file",
    title: "Read a text file's head",
    description: `The beginning of a text file in a workspace (CSV/TSV, VCF, SAM, FASTA/FASTQ, logs, JSON specs): at most max_bytes (default and limit ${MAX_READ_BYTES / 1024} KB), with its size; when the file is longer, truncated is true and download_url fetches the whole file. Binary or gzipped files are refused: use their download link.`,
    input: z.object({ workspace_id: workspaceId, key: z.string().min(1).max(1024).describe("Workspace-relative path, e.g. results/calls.vcf."), max_bytes: z.number().int().min(1).max(MAX_READ_BYTES).default(MAX_READ_BYTES) }).strict(),
    output: z.looseObject({ key: z.string(), size: z.number(), truncated: z.boolean(), text: z.string() }),
    annotations: READ_ONLY,
    scope: "files",
    handler: async (a, ctx) => ({ ...(await readTextHead(ctx.deps.store, await ctx.deps.access.workspace(ctx.auth, a.workspace_id), a.key, a.max_bytes)) }),
  }),
  defineTool({
    name: "service_create_upload_url",
    title: "Create an upload URL",
    description: "A presigned URL (valid an hour) to which the user or their client PUTs a file's bytes (curl -T file '<uploadUrl>'; with the same Content-Type header when content_type is given). Then the upload is confirmed (POST /v1/files/upload-confirm with workspace_id and file_key = fileKey), and the file exists at fileKey in the workspace; the URL sets the file once. This tool cannot read the user's local files itself.",
    input: z.object({
      workspace_id: workspaceId,
      filename: z.string().min(1).max(255).describe("A plain file name, without folders."),
      path: z.string().max(1024).optional().describe("Folder in the workspace, e.g. reads/."),
      content_type: z.string().max(255).optional(),
      size: z.number().int().nonnegative().optional(),
    }).strict(),
    output: z.looseObject({ uploadUrl: z.string(), fileKey: z.string(), expiresIn: z.number() }),
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    scope: "files",
    handler: async (a, ctx) => {
      const ws = await ctx.deps.access.workspace(ctx.auth, a.workspace_id);
      const r = await createUploadUrl(ctx.deps.store, ws, { filename: a.filename, path: a.path, contentType: a.content_type, size: a.size });
      return { ...r, next: "PUT the bytes to uploadUrl, then confirm with service_confirm_upload (or POST /v1/files/upload-confirm) with workspace_id and file_key (fileKey): the file is then at fileKey (an existing file there is replaced). The URL sets the file once." };
    },
  }),
  defineTool({
    name: "service_confirm_upload",
    title: "Confirm an upload",
    description: "Step 3 of an upload: once the bytes were PUT to the URL from service_create_upload_url, this makes them the file at file_key (replacing a file there) and returns the file (key, size, sha256). With size, a different uploaded size is refused. Confirming again returns the same file; a URL sets its file once.",
    input: z.object({
      workspace_id: workspaceId,
      file_key: z.string().min(1).max(1024).describe("The fileKey service_create_upload_url returned."),
      size: z.number().int().nonnegative().optional().describe("The size the upload should have, in bytes."),
    }).strict(),
    output: z.looseObject({ key: z.string(), size: z.number() }),
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    scope: "files",
    handler: async (a, ctx) => ({ ...(await confirmUpload(ctx.deps.store, await ctx.deps.access.workspace(ctx.auth, a.workspace_id), a.file_key, a.size)) }),
  }),
];
