/**
 * The OS sandbox of the python code tool: bubblewrap (`bwrap`). `buildBwrapArgv` is a pure function from a plan to
 * bwrap's argument array; `checkBwrap` and `probeInterpreter` find out, once per path, whether bwrap works here and
 * which folders the interpreter needs. What the sandbox contains is listed in docs/security.md.
 */
import { execFile } from "node:child_process";
import path from "node:path";

export interface BwrapPlan {
  /** Interpreter and its arguments, run as the sandbox's command. */
  command: readonly string[];
  /** The one writable folder; bound at the same path and used as the working directory. */
  workDir: string;
  /** Extra read-only folders (the interpreter's prefixes); system paths are always bound. */
  readOnly: readonly string[];
  /** The whole environment of the command (bwrap starts from an empty one). */
  env: Readonly<Record<string, string>>;
  allowNetwork: boolean;
  /** Size of the private /tmp (a tmpfs, so memory). */
  tmpBytes: number;
  /**
   * agentrl runs as root: no user namespace (root's processes escape RLIMIT_NPROC there), and the prelude drops to
   * an unprivileged uid itself, so only the capabilities it needs for that are kept.
   */
  asRoot: boolean;
}

/** System paths every interpreter needs, bound read-only when they exist. */
export const SYSTEM_PATHS = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64"] as const;
/** The part of /etc the dynamic linker and Python's standard library read; the rest of /etc is not visible. */
export const ETC_PATHS = [
  "/etc/ld.so.cache",
  "/etc/ld.so.conf",
  "/etc/ld.so.conf.d",
  "/etc/localtime",
  "/etc/alternatives",
  "/etc/ssl/certs",
  "/etc/mime.types",
] as const;

const isUnder = (child: string, parent: string) => child === parent || child.startsWith(parent.endsWith("/") ? parent : `${parent}/`);

/** Proper ancestors of the given absolute paths, parents first, without "/" and the system paths. */
function ancestors(paths: readonly string[]): string[] {
  const out = new Set<string>();
  for (const p of paths) {
    const parts = p.split("/").filter(Boolean);
    for (let i = 1; i < parts.length; i++) out.add(`/${parts.slice(0, i).join("/")}`);
  }
  return [...out].filter((d) => d !== "/tmp" && !SYSTEM_PATHS.some((s) => isUnder(d, s))).sort();
}

export function buildBwrapArgv(plan: BwrapPlan): string[] {
  const argv: string[] = [];
  argv.push("--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try");
  if (!plan.allowNetwork) argv.push("--unshare-net");
  if (plan.asRoot) {
    argv.push("--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_DAC_OVERRIDE");
  } else {
    argv.push("--unshare-user", "--disable-userns");
  }
  argv.push("--die-with-parent", "--new-session");
  for (const p of SYSTEM_PATHS) argv.push(p === "/usr" ? "--ro-bind" : "--ro-bind-try", p, p);
  for (const p of ETC_PATHS) argv.push("--ro-bind-try", p, p);
  const extra = [...new Set(plan.readOnly.map((p) => path.resolve(p)))]
    .filter((p) => !SYSTEM_PATHS.some((s) => isUnder(p, s)))
    .sort();
  // Folders under /tmp are bound after the private /tmp is mounted, which would hide them otherwise.
  const early = extra.filter((p) => !isUnder(p, "/tmp"));
  const late = extra.filter((p) => isUnder(p, "/tmp"));
  // Folders bwrap creates to mount into are traversable by the unprivileged uid the prelude drops to.
  for (const dir of ancestors(early)) argv.push("--perms", "0755", "--dir", dir);
  for (const p of early) argv.push("--ro-bind", p, p);
  argv.push("--proc", "/proc", "--dev", "/dev");
  argv.push("--size", String(Math.max(1024 * 1024, Math.floor(plan.tmpBytes))), "--perms", "1777", "--tmpfs", "/tmp");
  for (const dir of ancestors(late)) argv.push("--perms", "0755", "--dir", dir);
  for (const p of late) argv.push("--ro-bind", p, p);
  for (const dir of ancestors([plan.workDir])) argv.push("--perms", "0755", "--dir", dir);
  argv.push("--bind", plan.workDir, plan.workDir, "--chdir", plan.workDir);
  argv.push("--clearenv");
  for (const [key, value] of Object.entries(plan.env)) argv.push("--setenv", key, value);
  argv.push("--", ...plan.command);
  return argv;
}

function run(file: string, args: string[], timeoutMs: number): Promise<{ ok: boolean; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(file, args, { timeout: timeoutMs, env: { PATH: "/usr/bin:/bin" }, killSignal: "SIGKILL" }, (err, stdout, stderr) =>
      resolve({ ok: !err, stdout: String(stdout), stderr: String(stderr || (err ? err.message : "")) }),
    );
  });
}

const bwrapChecks = new Map<string, Promise<string | null>>();

/** Null when `bwrap` starts a sandbox here; otherwise why not. Cached per path. */
export function checkBwrap(bwrap: string): Promise<string | null> {
  let check = bwrapChecks.get(bwrap);
  if (!check) {
    const args = ["--ro-bind", "/", "/", "--unshare-pid", "--unshare-net", "--die-with-parent", "--new-session", "--", "true"];
    check = run(bwrap, args, 10_000).then((r) => (r.ok ? null : `${bwrap} cannot start a sandbox: ${r.stderr.trim().split("\n")[0] || "it failed"}`));
    bwrapChecks.set(bwrap, check);
  }
  return check;
}

const probes = new Map<string, Promise<string[]>>();

/** The folders `python` needs besides the system paths: its prefixes (a venv and the base install). Cached. */
export function probeInterpreter(python: string): Promise<string[]> {
  let probe = probes.get(python);
  if (!probe) {
    const code = "import json, sys; print(json.dumps([sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix]))";
    probe = run(python, ["-I", "-c", code], 20_000).then((r) => {
      if (!r.ok) throw new Error(`cannot run ${python}: ${r.stderr.trim().split("\n").pop() ?? ""}`);
      return [...new Set(JSON.parse(r.stdout) as string[])];
    });
    probe.catch(() => probes.delete(python));
    probes.set(python, probe);
  }
  return probe;
}
