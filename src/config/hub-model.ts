/**
 * A model named by its Hugging Face Hub id (`org/name`, optionally `@revision`) instead of a folder: resolved once, in
 * the CLI, to the snapshot folder of huggingface_hub's cache, and that folder is what the tokenizer, the chat template,
 * the worker and the engine then all read, so they cannot come from two snapshots.
 *
 * - A spec that is an existing path stays a path, so a local folder named like `org/name` still wins.
 * - The cache is huggingface_hub's: `HF_HUB_CACHE`, else `HF_HOME/hub`, else `~/.cache/huggingface/hub`, laid out as
 *   `models--org--name/refs/<revision>` (a commit hash) and `snapshots/<commit>/`.
 * - `HF_HUB_OFFLINE=1`: the cache only; an id that is not there is an input error (exit 2) naming the id and the
 *   cache folder. Otherwise huggingface_hub's `snapshot_download` runs in the worker's Python (its progress bars on
 *   stderr): it downloads what is missing, checks a branch for new commits, and answers from the cache when offline.
 */
import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { InputError } from "../errors.js";
import { defaultPythonExecutable } from "../repo-paths.js";

export interface HubModelId {
  repo: string;
  revision: string;
}

const HUB_ID = /^([A-Za-z0-9][\w.-]*)\/([A-Za-z0-9][\w.-]*)(?:@([\w./-]+))?$/;
const COMMIT = /^[0-9a-f]{40}$/;

/** The Hub id a model spec names, or null when it is a path (an existing one, or anything not shaped `org/name`). */
export function parseHubModelId(spec: string): HubModelId | null {
  if (existsSync(spec)) return null;
  const match = HUB_ID.exec(spec);
  if (!match || spec.startsWith(".")) return null;
  return { repo: `${match[1]}/${match[2]}`, revision: match[3] ?? "main" };
}

export function hubCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env["HF_HUB_CACHE"]) return env["HF_HUB_CACHE"];
  const home = env["HF_HOME"] ?? path.join(env["XDG_CACHE_HOME"] ?? path.join(os.homedir(), ".cache"), "huggingface");
  return path.join(home, "hub");
}

function offline(env: NodeJS.ProcessEnv): boolean {
  return ["1", "true", "yes", "on"].includes((env["HF_HUB_OFFLINE"] ?? "").toLowerCase());
}

/** The cached snapshot folder of an id, or null: huggingface_hub's layout, read without Python. */
export function cachedSnapshot(id: HubModelId, cacheDir: string): string | null {
  const repoDir = path.join(cacheDir, `models--${id.repo.replace("/", "--")}`);
  let commit = id.revision;
  if (!COMMIT.test(commit)) {
    const ref = path.join(repoDir, "refs", id.revision);
    if (!existsSync(ref)) return null;
    commit = readFileSync(ref, "utf8").trim();
  }
  const snapshot = path.join(repoDir, "snapshots", commit);
  return existsSync(path.join(snapshot, "config.json")) ? snapshot : null;
}

export interface ResolvedModel {
  /** The folder to read: the spec itself when it is a path. */
  dir: string;
  /** Set when the spec was a Hub id: what it resolved to, for the run's notes. */
  hub?: HubModelId;
}

/**
 * Resolves a model spec (a folder, or a Hub id) to a folder. `field` names where the spec came from, for errors
 * (`actor_rollout_ref.model.path`, `--model`).
 */
export async function resolveModel(spec: string, field: string, env: NodeJS.ProcessEnv = process.env): Promise<ResolvedModel> {
  const id = parseHubModelId(spec);
  if (!id) return { dir: spec };
  const cacheDir = hubCacheDir(env);
  const cached = cachedSnapshot(id, cacheDir);
  if (offline(env)) {
    if (cached) return { dir: cached, hub: id };
    throw new InputError(`${field}: ${spec} is no folder, and as a Hub id it is not in the Hugging Face cache ${cacheDir} (HF_HUB_OFFLINE is set)`, {
      hint: `download ${id.repo} at ${id.revision} into that cache first (huggingface_hub's snapshot_download or its CLI), unset HF_HUB_OFFLINE, or set HF_HUB_CACHE / HF_HOME to the cache that holds it`,
    });
  }
  if (cached && COMMIT.test(id.revision)) return { dir: cached, hub: id };  // a commit never changes: no need to ask
  return { dir: await snapshotDownload(id, field, env), hub: id };
}

/** Where a command's `model ID: FOLDER` note goes: stderr, unless the command runs --quiet. */
export function noteUnlessQuiet(flags: { quiet?: boolean }): ((message: string) => void) | undefined {
  return flags.quiet ? undefined : (message) => process.stderr.write(`note: ${message}\n`);
}

/** `resolveModel`'s folder, with one note (`model ID: FOLDER`) when the spec was a Hub id. */
export async function resolveModelPath(spec: string, field: string, note?: (message: string) => void): Promise<string> {
  const resolved = await resolveModel(spec, field);
  if (resolved.hub) note?.(`model ${resolved.hub.repo}@${resolved.hub.revision}: ${resolved.dir}`);
  return resolved.dir;
}

/** huggingface_hub's snapshot_download in the worker's Python; its progress bars go to our stderr. */
async function snapshotDownload(id: HubModelId, field: string, env: NodeJS.ProcessEnv): Promise<string> {
  const script = [
    "import sys",
    "from huggingface_hub import snapshot_download",
    "print(snapshot_download(sys.argv[1], revision=sys.argv[2]))",
  ].join("\n");
  const child = spawn(defaultPythonExecutable(), ["-c", script, id.repo, id.revision], { env, stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on("data", (chunk: Buffer) => {
    stderr += chunk.toString();
    process.stderr.write(chunk);
  });
  const code = await new Promise<number | null>((resolve, reject) => {
    child.on("error", reject);
    child.on("close", resolve);
  });
  const dir = stdout.trim().split("\n").at(-1) ?? "";
  if (code === 0 && dir && existsSync(dir)) return dir;
  const reason = stderr.trim().split("\n").filter(Boolean).at(-1) ?? `exit code ${code}`;
  throw new InputError(`${field}: cannot get ${id.repo}@${id.revision} from the Hugging Face Hub: ${reason}`, {
    hint: `check the id and your network (HF_ENDPOINT, HF_TOKEN for gated models); the cache is ${hubCacheDir(env)}`,
  });
}
