/** Log tails live in engine/log-tail.ts (the assistant's step-log tool reads them too); re-exported here. */
export { lastLines, tailObject, MAX_TAIL_BYTES } from "../engine/log-tail.js";
