/**
 * The storage layout (docs/storage.md#layout), defined once: where a workspace's files, a run's folder, its
 * provenance manifest and its step logs live in the object store, and where service data
 * (`_system/…`: records, indexes, claims, markers) is kept. Every module that builds such a
 * key calls these; none spells the layout itself.
 */

/** The manifest's name in a run folder (reserved: no step output may take it). */
export const MANIFEST_NAME = "run.json";
/** The step logs' folder in a run folder (reserved too). */
export const LOGS_FOLDER = "logs";

/** Storage key prefix of a workspace: `orgs/<org>/workspaces/<ws>/`. */
export const workspaceRoot = (organization: string, workspace: string) => `orgs/${organization}/workspaces/${workspace}/`;
/** Storage key prefix of an organization's tool runs made without a workspace: `orgs/<org>/_tool-runs/`. */
export const toolRunsRoot = (organization: string) => `orgs/${organization}/_tool-runs/`;

/** A run's folder, relative to its workspace, and the manifest and logs in it. */
export const manifestPath = (outputFolder: string) => `${outputFolder}/${MANIFEST_NAME}`;
export const stepLogPath = (outputFolder: string, stepId: string) => `${outputFolder}/${LOGS_FOLDER}/${stepId}.log`;

/** Full storage keys of a run's folder, manifest and step log. */
export const runRootKey = (run: { organization: string; workspace: string; outputFolder: string }) => `${workspaceRoot(run.organization, run.workspace)}${run.outputFolder}/`;
export const manifestKey = (run: { organization: string; workspace: string; outputFolder: string }) => `${workspaceRoot(run.organization, run.workspace)}${manifestPath(run.outputFolder)}`;
export const stepLogKey = (run: { organization: string; workspace: string; outputFolder: string }, stepId: string) => `${workspaceRoot(run.organization, run.workspace)}${stepLogPath(run.outputFolder, stepId)}`;
/** A step log's key from its run folder's key (`runRootKey`), as executors get it. */
export const stepLogKeyIn = (runRoot: string, stepId: string) => `${runRoot}${LOGS_FOLDER}/${stepId}.log`;

/* ---------- Service data (docs/storage.md#service-data) ---------- */

/**
 * Every key of service data starts with `_system/`: hidden from listings unless asked for by
 * prefix, and never a file key (a presigned URL for one is refused).
 */
export const SYSTEM_PREFIX = "_system/";
/** Whether a storage key is service data rather than a workspace file. */
export const isSystemKey = (key: string) => key.startsWith(SYSTEM_PREFIX);

/** The claim that an embedded presigned PUT URL has been used (one per signature): a used URL is refused. */
export const PRESIGNED_PUT_CLAIMS_PREFIX = `${SYSTEM_PREFIX}presigned-put-used/`;
export const presignedPutClaimKey = (signature: string) => `${PRESIGNED_PUT_CLAIMS_PREFIX}${signature}`;

/**
 * Presigned uploads to a store whose URLs could write again until they expire (S3): each URL
 * writes its own staging key, `_system/uploads/<org>/<ws>/<sha256 of the file's storage key>/<id>`,
 * and upload-confirm turns the newest staged upload into the file. `<id>` is the URL's expiry
 * (Unix seconds, 12 digits) and a random part; `<id>.used` marks an upload as confirmed (or
 * discarded), so what its URL writes afterwards is never confirmed.
 */
export const UPLOADS_PREFIX = `${SYSTEM_PREFIX}uploads/`;
export const stagedUploadPrefix = (organization: string, workspace: string, storageKeyHash: string) => `${UPLOADS_PREFIX}${organization}/${workspace}/${storageKeyHash}/`;
export const USED_UPLOAD_SUFFIX = ".used";

/**
 * Multipart uploads in progress (docs/storage.md#multipart-uploads): one record per upload,
 * `_system/multipart/<org>/<ws>/<upload id>.json`, holding the file it will become and the
 * store's own upload id. A caller names an upload by its id within its workspace only.
 */
export const MULTIPART_RECORDS_PREFIX = `${SYSTEM_PREFIX}multipart/`;
export const multipartRecordKey = (organization: string, workspace: string, uploadId: string) => `${MULTIPART_RECORDS_PREFIX}${organization}/${workspace}/${uploadId}.json`;

/**
 * Files whose SHA-256 is still being computed (a multipart upload, confirmed without reading
 * its bytes): `_system/checksums/<sha256 of the file's storage key>.json`, removed once the
 * checksum is recorded (services/checksums.ts).
 */
export const PENDING_CHECKSUMS_PREFIX = `${SYSTEM_PREFIX}checksums/`;
export const pendingChecksumKey = (storageKeyHash: string) => `${PENDING_CHECKSUMS_PREFIX}${storageKeyHash}.json`;

/** An organization's service data: `_system/orgs/<org>/`. */
const orgData = (organization: string) => `${SYSTEM_PREFIX}orgs/${organization}/`;

/** Workspace records of an organization (listing it also reaches their service data: filter on `<ws>.json`). */
export const workspaceRecordsPrefix = (organization: string) => `${orgData(organization)}workspaces/`;
export const workspaceRecordKey = (organization: string, workspace: string) => `${workspaceRecordsPrefix(organization)}${workspace}.json`;
/** A workspace's service data: `_system/orgs/<org>/workspaces/<ws>/` (next to its record, `<ws>.json`). */
const workspaceData = (organization: string, workspace: string) => `${workspaceRecordsPrefix(organization)}${workspace}/`;

/** API key records by key id, and the index from a key's hash to its id. */
export const KEY_RECORDS_PREFIX = `${SYSTEM_PREFIX}keys/`;
export const keyRecordKey = (keyId: string) => `${KEY_RECORDS_PREFIX}${keyId}.json`;
export const keyHashKey = (hash: string) => `${SYSTEM_PREFIX}key-hashes/${hash}.json`;
/** An organization's keys: one entry per key id. */
export const organizationKeysPrefix = (organization: string) => `${orgData(organization)}keys/`;
export const organizationKeyEntry = (organization: string, keyId: string) => `${organizationKeysPrefix(organization)}${keyId}`;

/** A workspace's conversations, and its index of them by last activity (`<rank>.<id>` entries). */
export const conversationsPrefix = (organization: string, workspace: string) => `${workspaceData(organization, workspace)}conversations/`;
export const conversationKey = (organization: string, workspace: string, id: string) => `${conversationsPrefix(organization, workspace)}${id}.json`;
export const conversationActivityPrefix = (organization: string, workspace: string) => `${orgData(organization)}conversation-activity/${workspace}/`;
/** A conversation's entry in the activity index; `rank` sorts the most recent first (services/store.ts). */
export const conversationActivityEntry = (organization: string, workspace: string, rank: string, id: string) => `${conversationActivityPrefix(organization, workspace)}${rank}.${id}`;

/** Markers that an index was built (docs/storage.md#service-data): present once, never removed. */
export const KEYS_BY_ORGANIZATION_INDEX_MARKER = `${SYSTEM_PREFIX}indexes/keys-by-organization`;
export const conversationActivityIndexMarker = (organization: string, workspace: string) => `${SYSTEM_PREFIX}indexes/conversation-activity/${organization}/${workspace}`;

/** A workspace's render job records. */
export const renderJobsPrefix = (organization: string, workspace: string) => `${workspaceData(organization, workspace)}render-jobs/`;
/** A render job's record; `rank` orders a workspace's jobs newest first (media/render-jobs.ts). */
export const renderJobKey = (organization: string, workspace: string, rank: string) => `${renderJobsPrefix(organization, workspace)}${rank}.json`;
/** Render jobs not finished yet: one marker per job id, holding its record's key. */
export const RENDER_ACTIVE_PREFIX = `${SYSTEM_PREFIX}render-active/`;
export const renderActiveKey = (jobId: string) => `${RENDER_ACTIVE_PREFIX}${jobId}`;

/** Derived data of a viewer preparation, by the fingerprint of what it was derived from. */
export const derivedPrefix = (organization: string, workspace: string, fingerprint: string) => `${workspaceData(organization, workspace)}derived/${fingerprint}/`;

/** Where run folders are claimed (never visible through the files API): `_system/run-folders/<workspace root><folder>`. */
export const RUN_FOLDER_CLAIMS_PREFIX = `${SYSTEM_PREFIX}run-folders/`;
export const runFolderClaimKey = (workspaceRootKey: string, folder: string) => `${RUN_FOLDER_CLAIMS_PREFIX}${workspaceRootKey}${folder}`;

/** Temporary keys of streamed uploads to S3 before their copy to the final key. */
export const TEMP_UPLOADS_PREFIX = `${SYSTEM_PREFIX}tmp/uploads/`;
