// Escape attempts against the python code tool's bubblewrap sandbox (docs/security.md names each test here).
// bwrap is required: scripts/install.sh installs it where apt is available.
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildBwrapArgv, loadToolRegistry, pythonToolConfigSchema, PythonCodeTool } from "../src/tools/index.js";
import { spawn } from "node:child_process";
import { REPO_ROOT, VENV_PYTHON } from "./helpers/cli.js";
import { countingServer } from "./helpers/net.js";
import { tempDir } from "./helpers/tmp.js";

const schema = { type: "function", function: { name: "code_interpreter", description: "run python" } };

async function run(code: string, overrides: Record<string, unknown> = {}) {
  const settings = pythonToolConfigSchema.parse({ python: VENV_PYTHON, timeout_s: 5, ...overrides });
  const tool = new PythonCodeTool({ type: "native" }, schema, settings);
  const started = performance.now();
  const result = await tool.execute("id", { code }, { signal: new AbortController().signal });
  return { text: result.response.text ?? "", metrics: result.metrics, ms: performance.now() - started };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Host pids whose command line mentions `needle` (the sandboxed interpreter runs prelude.py). */
function hostPidsWith(needle: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, "utf8").includes(needle)) pids.push(Number(entry));
    } catch {
      // gone
    }
  }
  return pids;
}

describe("python sandbox (bwrap)", () => {
  const outside = tempDir("sandbox-outside");
  const homeDir = mkdtempSync(path.join(os.homedir(), ".agentrl-sandbox-test-"));
  const secretFile = path.join(outside, "secret.txt");
  const homeSecret = path.join(homeDir, "secret.txt");
  beforeAll(() => {
    writeFileSync(secretFile, "TOP-SECRET-OUTSIDE");
    writeFileSync(homeSecret, "TOP-SECRET-HOME");
  });
  afterAll(() => rmSync(homeDir, { recursive: true, force: true }));

  it("environ: code cannot read the parent's /proc/<ppid>/environ or any variable of agentrl", async () => {
    process.env["AGENTRL_SANDBOX_SECRET"] = "s3cr3t-value";
    try {
      const { text } = await run(
        [
          "import os",
          "found = []",
          "for pid in [os.getppid(), 1] + [int(p) for p in os.listdir('/proc') if p.isdigit()]:",
          "    try:",
          "        found.append(open(f'/proc/{pid}/environ', 'rb').read().decode(errors='replace'))",
          "    except OSError:",
          "        pass",
          `found.append(open('/proc/${process.pid}/environ', 'rb').read().decode() if os.path.exists('/proc/${process.pid}/environ') else '')`,
          "print('|'.join(found))",
          "print(sorted(os.environ))",
        ].join("\n"),
      );
      expect(text).not.toContain("s3cr3t-value");
      expect(text).not.toContain("AGENTRL_SANDBOX_SECRET");
      expect(text).toContain("['HOME', 'LANG', 'MKL_NUM_THREADS', 'OMP_NUM_THREADS', 'OPENBLAS_NUM_THREADS', 'PATH', 'PWD', 'TMPDIR']");
    } finally {
      delete process.env["AGENTRL_SANDBOX_SECRET"];
    }
  });

  it("read outside: files in the host's temp folder and home are not visible", async () => {
    const { text } = await run(
      `import os\nfor p in [${JSON.stringify(secretFile)}, ${JSON.stringify(homeSecret)}, "/etc/shadow", "/etc/hostname"]:\n    print(p, os.path.exists(p))\nprint("home:", sorted(os.listdir(${JSON.stringify(os.homedir())})) if os.path.isdir(${JSON.stringify(os.homedir())}) else "no home")`,
    );
    expect(text).not.toContain("TOP-SECRET");
    expect(text).toContain(`${secretFile} False`);
    expect(text).toContain(`${homeSecret} False`);
    expect(text).toContain("/etc/shadow False");
    expect(text.split("\n").find((l) => l.startsWith("home:"))).not.toContain(path.basename(homeDir));
  });

  it("write outside: only the scratch folder is writable", async () => {
    const target = path.join(outside, "written.txt");
    const { text } = await run(
      [
        "import os",
        `for p in [${JSON.stringify(target)}, "/usr/x", "/etc/x", ${JSON.stringify(path.join(os.homedir(), "x"))}, "/proc/x"]:`,
        "    try:",
        "        open(p, 'w').write('x')",
        "        print('wrote', p)",
        "    except OSError as e:",
        "        print('refused', p, type(e).__name__)",
        "open('here.txt', 'w').write('ok')",
        "print('scratch ok')",
      ].join("\n"),
    );
    expect(text).not.toContain("wrote");
    expect(text).toContain("scratch ok");
    expect(existsSync(target)).toBe(false);
    expect(existsSync(path.join(os.homedir(), "x"))).toBe(false);
  });

  describe("network", () => {
    const server = countingServer();

    it("network: 127.0.0.1 is unreachable, even through ctypes", async () => {
      const { text, metrics } = await run(
        [
          "import ctypes, socket, struct",
          "try:",
          `    socket.create_connection(("127.0.0.1", ${server.port()}), timeout=2); print("connected")`,
          "except OSError as e:",
          "    print('refused', e)",
          "libc = ctypes.CDLL(None, use_errno=True)",
          "fd = libc.socket(2, 1, 0)",
          `addr = struct.pack('!HH4s8x', 2, ${server.port()}, bytes([127, 0, 0, 1]))`,
          "addr = struct.pack('H', 2) + addr[2:]",
          "print('libc connect', libc.connect(fd, addr, len(addr)))",
        ].join("\n"),
      );
      expect(text).not.toContain("connected");
      expect(text).toContain("libc connect -1");
      expect(metrics["network"]).toBe("namespace");
      expect(server.connections()).toBe(0);
    });
  });

  it("survivor: a fork+setsid grandchild dies with the call and never writes", async () => {
    const marker = path.join(outside, "late.txt");
    // The call's own TMPDIR names its scratch folder, and so its bwrap processes, apart from other tests' calls.
    const scratchParent = tempDir("sandbox-survivor");
    const savedTmp = process.env.TMPDIR;
    process.env.TMPDIR = scratchParent;
    let result: Awaited<ReturnType<typeof run>>;
    try {
      result = await run(
        [
          "import ctypes, os, time",
          "libc = ctypes.CDLL(None)",
          "pid = libc.fork()",
          "if pid == 0:",
          "    os.setsid()",
          "    if libc.fork() == 0:",
          "        time.sleep(1.5)",
          "        open('late.txt', 'w').write('alive')",
          `        open(${JSON.stringify(marker)}, 'w').write('alive')`,
          "    os._exit(0)",
          "print('parent done', flush=True)",
        ].join("\n"),
        { timeout_s: 5 },
      );
    } finally {
      process.env.TMPDIR = savedTmp;
    }
    expect(result.text).toBe("parent done\n");
    expect(result.ms).toBeLessThan(3000);
    await sleep(2500);
    expect(existsSync(marker)).toBe(false);
    expect(hostPidsWith(scratchParent)).toEqual([]);
  });

  it("killed host: SIGKILL of the process running a call ends every sandboxed process", async () => {
    // A private TMPDIR names the call's scratch folder, and with it the sandboxed processes' command lines.
    const hostTmp = tempDir("sandbox-host");
    const script = [
      `import { pythonToolConfigSchema, runPythonCode } from ${JSON.stringify(path.join(REPO_ROOT, "dist/tools/index.js"))};`,
      `const config = pythonToolConfigSchema.parse({ python: ${JSON.stringify(VENV_PYTHON)}, timeout_s: 60, allow_subprocess: true });`,
      // The forked, setsid'd grandchild sleeps; the parent says it is up (a file in its scratch folder), then sleeps.
      "await runPythonCode('import os, time\\nif os.fork() == 0:\\n    os.setsid()\\n    time.sleep(60)\\nopen(\\'up\\', \\'w\\').write(\\'1\\')\\ntime.sleep(60)\\n', config);",
    ].join("\n");
    const host = spawn(process.execPath, ["--input-type=module", "-e", script], { env: { ...process.env, TMPDIR: hostTmp }, stdio: ["ignore", "ignore", "inherit"] });
    try {
      // The kill lands while the call runs, its grandchild forked: not during the sandbox's own start-up.
      const isUp = () => readdirSync(hostTmp).some((name) => existsSync(path.join(hostTmp, name, "up")));
      for (let waited = 0; !isUp() && waited < 30_000; waited += 50) await sleep(50);
      expect(isUp()).toBe(true);
      const running = hostPidsWith(hostTmp);
      // bwrap and the interpreters it started, all naming the scratch folder.
      expect(running.length).toBeGreaterThanOrEqual(2);
      host.kill("SIGKILL");
      let left = running;
      for (let waited = 0; left.length > 0 && waited < 5_000; waited += 100) {
        await sleep(100);
        left = hostPidsWith(hostTmp);
      }
      expect(left).toEqual([]);
    } finally {
      host.kill("SIGKILL");
      rmSync(hostTmp, { recursive: true, force: true });
    }
  });

  it("time bomb: a sleeping grandchild holding the pipes does not delay the timeout", async () => {
    const { text, ms } = await run("import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(60)\ntime.sleep(60)\n", {
      timeout_s: 1,
      allow_subprocess: true,
    });
    expect(text).toBe("[timed out after 1s]");
    expect(ms).toBeLessThan(3000);
  });

  it("cpu bomb: spinning threads end at the timeout, promptly", async () => {
    const { text, metrics, ms } = await run("import threading\ndef spin():\n    while True: pass\nfor _ in range(4): threading.Thread(target=spin).start()\nspin()\n", {
      timeout_s: 1,
    });
    expect(["timeout", "killed"]).toContain(metrics["status"]);
    expect(text).toMatch(/\[(timed out after 1s|killed by SIG\w+)\]$/);
    expect(ms).toBeLessThan(3000);
  });

  it("memory bomb: allocation beyond memory_limit_mb fails inside the sandbox", async () => {
    const { text } = await run("x = bytearray(2 * 1024 ** 3)\nprint('allocated')\n", { memory_limit_mb: 256 });
    expect(text).toContain("MemoryError");
    expect(text).not.toContain("allocated");
  });

  it("fork bomb: processes are bounded by max_processes (RLIMIT_NPROC)", async () => {
    const { text, ms } = await run(
      [
        "import ctypes, os, time",
        "libc = ctypes.CDLL(None)",
        "n = 0",
        "for _ in range(200):",
        "    pid = libc.fork()",
        "    if pid == 0:",
        "        time.sleep(30)",
        "        os._exit(0)",
        "    if pid < 0:",
        "        break",
        "    n += 1",
        "print('forked', n, flush=True)",
      ].join("\n"),
      { max_processes: 16, timeout_s: 5 },
    );
    const forked = Number(/forked (\d+)/.exec(text)?.[1] ?? "-1");
    expect(forked).toBeGreaterThanOrEqual(0);
    expect(forked).toBeLessThan(16);
    expect(ms).toBeLessThan(4000);
  });

  it("output flood: output is capped and the call ends", async () => {
    const { text, metrics, ms } = await run("import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n", { max_output_bytes: 10_000 });
    expect(metrics["status"]).toBe("output_limit");
    expect(text.length).toBeLessThanOrEqual(10_000 + 50);
    expect(ms).toBeLessThan(3000);
  });

  it("refuses: without a working bwrap and no sandbox: none, nothing runs", async () => {
    const marker = path.join(outside, "ran.txt");
    const { text, metrics } = await run(`open(${JSON.stringify(marker)}, "w").write("ran")`, { bwrap: "/nonexistent/bwrap" });
    expect(metrics["status"]).toBe("refused");
    expect(text).toContain("sandbox: bwrap");
    expect(text).toContain("sandbox: none");
    expect(existsSync(marker)).toBe(false);

    const yaml = path.join(outside, "py.yaml");
    writeFileSync(
      yaml,
      readFileSync(path.join(import.meta.dirname, "..", "tool-configs", "python_code_tool_config.yaml"), "utf8")
        .replace('python: "python3"', `python: "${VENV_PYTHON}"`)
        .replace('bwrap: "bwrap"', 'bwrap: "/nonexistent/bwrap"'),
    );
    await expect(loadToolRegistry(yaml)).rejects.toThrow(/py\.yaml: tools\.0\.config\.sandbox: .*\/nonexistent\/bwrap/);
  });

  it("sandbox: none is the explicit weaker mode and still runs", async () => {
    const { text } = await run("print('weak')", { sandbox: "none", bwrap: "/nonexistent/bwrap" });
    expect(text).toBe("weak\n");
  });
});

describe("buildBwrapArgv", () => {
  const base = {
    command: ["/venv/bin/python", "-I", "prelude.py"],
    workDir: "/tmp/agentrl-py-abc",
    readOnly: ["/venv", "/usr", "/opt/py/3.11"],
    env: { PATH: "/usr/bin:/bin", HOME: "/tmp/agentrl-py-abc" },
    allowNetwork: false,
    tmpBytes: 16 * 1024 * 1024,
    asRoot: false,
  };
  const pairs = (argv: string[], flag: string) => argv.flatMap((a, i) => (a === flag ? [`${argv[i + 1]}:${argv[i + 2] ?? ""}`] : []));

  it("binds system paths and the interpreter's prefixes read-only, one writable scratch folder, fresh /proc /dev /tmp", () => {
    const argv = buildBwrapArgv(base);
    expect(pairs(argv, "--ro-bind")).toEqual(["/usr:/usr", "/opt/py/3.11:/opt/py/3.11", "/venv:/venv"]);
    expect(pairs(argv, "--bind")).toEqual(["/tmp/agentrl-py-abc:/tmp/agentrl-py-abc"]);
    expect(argv).toEqual(expect.arrayContaining(["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--chdir", "/tmp/agentrl-py-abc"]));
    expect(argv).toContain("--size");
    expect(argv.slice(argv.indexOf("--") + 1)).toEqual(base.command);
    expect(argv.some((a) => a === "/" || a === os.homedir())).toBe(false);
  });

  it("unshares pid, net, ipc, uts and (as a user) the user namespace; dies with its parent; clears the environment", () => {
    const argv = buildBwrapArgv(base);
    expect(argv).toEqual(expect.arrayContaining(["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-user", "--die-with-parent", "--new-session", "--clearenv"]));
    expect(pairs(argv, "--setenv")).toEqual(["PATH:/usr/bin:/bin", "HOME:/tmp/agentrl-py-abc"]);
    const root = buildBwrapArgv({ ...base, asRoot: true, allowNetwork: true });
    expect(root).not.toContain("--unshare-user");
    expect(root).not.toContain("--unshare-net");
    expect(root).toEqual(expect.arrayContaining(["--cap-drop", "ALL", "--unshare-pid"]));
  });
});
