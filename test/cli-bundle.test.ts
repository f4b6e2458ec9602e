/**
 * bin/agentrl.js runs the CLI bundled (scripts/bundle.mjs) unless AGENTRL_UNBUNDLED=1 or there is no bundle, and
 * the two give the same CLI. Which file ran is read from a module-loading hook, not assumed.
 */
import { writeFileSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import { runCli } from "./helpers/cli.js";
import { tempDir } from "./helpers/tmp.js";

const scratch = tempDir("cli-bundle");
// Prints every agentrl module file Node loads, one `loaded <url>` line each on stderr.
const hooks = path.join(scratch, "hooks.mjs");
writeFileSync(hooks, `export async function load(url, context, next) {
  if (url.includes("/dist/")) process._rawDebug("loaded " + url);
  return next(url, context);
}\n`);
const register = path.join(scratch, "register.mjs");
writeFileSync(register, `import { register } from "node:module";\nregister(${JSON.stringify(pathToFileURL(hooks).href)});\n`);

async function run(args: string[], env: NodeJS.ProcessEnv = {}) {
  const result = await runCli(args, { env: { NODE_OPTIONS: `--import=${register}`, ...env } });
  const loaded = result.stderr.split("\n").filter((l) => l.startsWith("loaded ")).map((l) => l.slice("loaded ".length));
  const stderr = result.stderr.split("\n").filter((l) => !l.startsWith("loaded ")).join("\n");
  return { code: result.code, stdout: result.stdout, stderr, loaded };
}

describe("bin/agentrl.js", () => {
  it("runs the bundle, and tsc's modules only with AGENTRL_UNBUNDLED=1, with the same output", async () => {
    const args = ["train", "--config", path.join(scratch, "missing.yaml")];
    const bundled = await run(args);
    const modules = await run(args, { AGENTRL_UNBUNDLED: "1" });
    expect(bundled.loaded.some((url) => url.endsWith("/dist/bundle/agentrl.mjs"))).toBe(true);
    expect(bundled.loaded.filter((url) => url.includes("/dist/cli/"))).toEqual([]);
    expect(modules.loaded.some((url) => url.endsWith("/dist/cli/index.js"))).toBe(true);
    expect(modules.loaded.filter((url) => url.includes("/dist/bundle/"))).toEqual([]);
    expect(bundled.code).toBe(2);
    expect(bundled.stderr).toContain("missing.yaml: no such file");
    expect({ ...modules, loaded: [] }).toEqual({ ...bundled, loaded: [] });
  });

  it("--help loads the table of contents, not the chunks a command imports lazily", async () => {
    const chunks = (loaded: string[]) => new Set(loaded.filter((url) => url.includes("/dist/bundle/chunks/")));
    const help = await run(["--help"]);
    const train = await run(["train", "--config", path.join(scratch, "missing.yaml")]);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain("Usage: agentrl");
    const helpChunks = chunks(help.loaded);
    const trainChunks = chunks(train.loaded);
    // What --help loads, train loads too (the shared chunks), and train's command modules besides.
    expect([...helpChunks].filter((url) => !trainChunks.has(url))).toEqual([]);
    expect(trainChunks.size).toBeGreaterThan(helpChunks.size + 10);
  });
});
