#!/usr/bin/env node
// Writes worker/agentrl_worker/protocol.schema.json and the field reference of docs/worker-protocol.md from the zod
// schemas of src/train/worker/protocol.ts (run after `npm run build`).
import { readFileSync, writeFileSync } from "node:fs";
import { PROTOCOL_SCHEMA_FILE, protocolSchemaText } from "../dist/train/worker/protocol-schema.js";
import { PROTOCOL_DOC_FILE, withFieldReference } from "../dist/train/worker/protocol-doc.js";

const root = new URL("../", import.meta.url);
writeFileSync(new URL(PROTOCOL_SCHEMA_FILE, root), protocolSchemaText());
const doc = new URL(PROTOCOL_DOC_FILE, root);
writeFileSync(doc, withFieldReference(readFileSync(doc, "utf8")));
