#!/usr/bin/env node
// Writes docs/config.md from the zod schemas (run after `npm run build`).
import { writeFileSync } from "node:fs";
import { configReference } from "../dist/cli/config-doc.js";

writeFileSync(new URL("../docs/config.md", import.meta.url), configReference());
