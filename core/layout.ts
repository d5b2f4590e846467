/**
 * The storage layout (docs/storage.md#layout), defined once: where a workspace's files, a run's folder, its
 * provenance manifest and its step logs live in the object store. Every module that builds
 * such a key calls these; none spells the layout itself.
 */

/** The manifest's name in a run folder (reserved: no step output may take it). */
export const MANIFEST_NAME = "run.json";
/** The step logs' folder in a run folder (reserved too). */
export const LOGS_FOLDER = "logs";

/** Storage key prefix of a workspace: `orgs/<org>/workspaces/<ws>/`. */
export const workspaceRoot = (organization: string, workspace: string) => `orgs/${organization}/workspaces/${workspace}/`;

/** A run's folder, relative to its workspace, and the manifest and logs in it. */
export const manifestPath = (outputFolder: string) => `${outputFolder}/${MANIFEST_NAME}`;
export const stepLogPath = (outputFolder: string, stepId: string) => `${outputFolder}/${LOGS_FOLDER}/${stepId}.log`;

/** Full storage keys of a run's folder, manifest and step log. */
export const runRootKey = (run: { organization: string; workspace: string; outputFolder: string }) => `${workspaceRoot(run.organization, run.workspace)}${run.outputFolder}/`;
export const manifestKey = (run: { organization: string; workspace: string; outputFolder: string }) => `${workspaceRoot(run.organization, run.workspace)}${manifestPath(run.outputFolder)}`;
export const stepLogKey = (run: { organization: string; workspace: string; outputFolder: string }, stepId: string) => `${workspaceRoot(run.organization, run.workspace)}${stepLogPath(run.outputFolder, stepId)}`;
/** A step log's key from its run folder's key (`runRootKey`), as executors get it. */
export const stepLogKeyIn = (runRoot: string, stepId: string) => `${runRoot}${LOGS_FOLDER}/${stepId}.log`;

/** The claim that an embedded presigned PUT URL has been used (one per signature): a used URL is refused. */
export const PRESIGNED_PUT_CLAIMS_PREFIX = "_system/presigned-put-used/";
export const presignedPutClaimKey = (signature: string) => `${PRESIGNED_PUT_CLAIMS_PREFIX}${signature}`;

/**
 * Presigned uploads to a store whose URLs could write again until they expire (S3): each URL
 * writes its own staging key, `_system/uploads/<org>/<ws>/<sha256 of the file's storage key>/<id>`,
 * and upload-confirm turns the newest staged upload into the file. `<id>` is the URL's expiry
 * (Unix seconds, 12 digits) and a random part; `<id>.used` marks an upload as confirmed (or
 * discarded), so what its URL writes afterwards is never confirmed.
 */
export const UPLOADS_PREFIX = "_system/uploads/";
export const stagedUploadPrefix = (organization: string, workspace: string, storageKeyHash: string) => `${UPLOADS_PREFIX}${organization}/${workspace}/${storageKeyHash}/`;
export const USED_UPLOAD_SUFFIX = ".used";
