/** Viewer-link tokens live in engine/viewer-token.ts (the assistant signs links too); re-exported for the routes. */
export { signGrant, verifyGrant, MAX_TOKEN_CHARS, type GrantCheck } from "../engine/viewer-token.js";
