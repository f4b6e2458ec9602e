// The local Python code tool: it runs code in a separate, limited process and survives every fault the
// model's code can produce (exceptions, endless loops, forks, memory hogs, floods of output, bad bytes, network).
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { spawn } from "node:child_process";
import path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import {
  loadToolRegistry,
  pythonToolConfigSchema,
  PythonCodeTool,
  resolveInterpreter,
  runToolCall,
  type ToolRegistry,
} from "../src/tools/index.js";
import { REPO_ROOT, VENV_PYTHON } from "./helpers/cli.js";
import { countingServer } from "./helpers/net.js";
import { tempDir } from "./helpers/tmp.js";

const schema = { type: "function", function: { name: "code_interpreter", description: "run python" } };
const ctx = () => ({ signal: new AbortController().signal });

function tool(overrides: Record<string, unknown> = {}) {
  const settings = pythonToolConfigSchema.parse({ python: VENV_PYTHON, timeout_s: 5, ...overrides });
  return new PythonCodeTool({ type: "native" }, schema, settings);
}

async function run(code: string, overrides: Record<string, unknown> = {}) {
  const result = await tool(overrides).execute("id", { code }, ctx());
  return { text: result.response.text ?? "", metrics: result.metrics };
}

/** A process is gone when it no longer exists or is a zombie waiting to be reaped. */
function processGone(pid: number): boolean {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    return /^State:\s+Z/m.test(status);
  } catch {
    return true;
  }
}

describe("python code tool", () => {
  it("returns stdout then stderr", async () => {
    const { text, metrics } = await run('import sys\nprint("out")\nprint("err", file=sys.stderr)\nprint(6*7)');
    expect(text).toBe("out\n42\nerr\n");
    expect(metrics).toMatchObject({ status: "finished", exitCode: 0 });
  });

  it("shows the traceback of the model's code without the prelude", async () => {
    const { text, metrics } = await run("x = 1\ny = x / 0\n");
    expect(text).toContain('File "<code>", line 2');
    expect(text).toContain("ZeroDivisionError: division by zero");
    expect(text).not.toContain("prelude");
    expect(metrics).toMatchObject({ status: "finished", exitCode: 1 });
  });

  it("stops code that loops forever at the wall-clock timeout", async () => {
    const { text, metrics } = await run('print("start", flush=True)\nwhile True:\n    pass\n', { timeout_s: 1 });
    expect(text).toBe("start\n[timed out after 1s]");
    expect(metrics["status"]).toBe("timeout");
  });

  it("refuses os.fork and kills children forked around the block", async () => {
    const blocked = await run("import os\nos.fork()\n");
    expect(blocked.text).toContain("PermissionError: creating processes is disabled in this sandbox");
    const subprocess = await run('import subprocess\nsubprocess.run(["echo", "hi"])\n');
    expect(subprocess.text).toContain("PermissionError: creating processes is disabled in this sandbox");
    // libc fork bypasses the Python-level block; the process-group kill must still reap the child.
    const escaped = await run(
      "import ctypes, os, time\npid = ctypes.CDLL(None).fork()\nif pid == 0:\n    time.sleep(1000)\nelse:\n    print(pid, flush=True)\n",
      // The weaker mode: under bwrap the pid is one of the sandbox's PID namespace (test/python-sandbox.test.ts).
      { sandbox: "none" },
    );
    const childPid = Number(escaped.text.trim());
    expect(childPid).toBeGreaterThan(0);
    // SIGKILL is delivered asynchronously: give the kernel a moment before concluding the child survived.
    for (let i = 0; i < 40 && !processGone(childPid); i++) await new Promise((r) => setTimeout(r, 50));
    expect(processGone(childPid)).toBe(true);
  });

  it("dies with agentrl when agentrl is killed (sandbox: none)", async () => {
    // Uses the built tool in a separate Node process (npm test builds first). The weaker mode: the code writes its pid
    // to a host file, which the bwrap sandbox would not let it do (test/python-sandbox.test.ts covers bwrap).
    const pidFile = path.join(tempDir("pdeath"), "pid");
    const script = [
      `import { runPythonCode, pythonToolConfigSchema } from ${JSON.stringify(path.join(REPO_ROOT, "dist", "tools", "index.js"))};`,
      `const config = pythonToolConfigSchema.parse({ python: process.argv[1], timeout_s: 120, sandbox: "none" });`,
      `const pidFile = JSON.stringify(process.argv[2]);`,
      "await runPythonCode(`import os, time\\nopen(${pidFile}, \"w\").write(f\"{os.getpid()} {os.getcwd()}\")\\ntime.sleep(120)\\n`, config);",
    ].join("\n");
    const node = spawn(process.execPath, ["--input-type=module", "-e", script, VENV_PYTHON, pidFile], { stdio: "ignore" });
    let pythonPid = 0;
    let workDir = "";
    try {
      for (let i = 0; i < 200 && !pythonPid; i++) {
        await new Promise((r) => setTimeout(r, 50));
        if (existsSync(pidFile)) [pythonPid, workDir] = readFileSync(pidFile, "utf8").split(" ").map((x, i) => (i === 0 ? Number(x) || 0 : x)) as [number, string];
      }
      expect(pythonPid).toBeGreaterThan(0);
      expect(processGone(pythonPid)).toBe(false);
      node.kill("SIGKILL");
      for (let i = 0; i < 100 && !processGone(pythonPid); i++) await new Promise((r) => setTimeout(r, 50));
      expect(processGone(pythonPid)).toBe(true);
    } finally {
      node.kill("SIGKILL");
      if (pythonPid && !processGone(pythonPid)) process.kill(pythonPid, "SIGKILL");
      rmSync(path.dirname(pidFile), { recursive: true, force: true });
      // The killed agentrl never reached its cleanup; a killed run leaves its work dir behind (documented).
      if (workDir.includes("agentrl-py-")) rmSync(workDir, { recursive: true, force: true });
    }
  });

  it("lets fork through only when allowed", async () => {
    const { text } = await run('import subprocess\nprint(subprocess.run(["echo", "hi"], capture_output=True, text=True).stdout, end="")', {
      allow_subprocess: true,
    });
    expect(text).toBe("hi\n");
  });

  it("turns a memory hog into a MemoryError", async () => {
    const { text } = await run("x = bytearray(2 * 1024 ** 3)\nprint('allocated')\n", { memory_limit_mb: 256 });
    expect(text).toContain("MemoryError");
    expect(text).not.toContain("allocated");
  });

  it("stops a flood of output at the cap", async () => {
    const { text, metrics } = await run('while True:\n    print("x" * 999)\n', { max_output_bytes: 10_000 });
    expect(metrics["status"]).toBe("output_limit");
    expect(text.endsWith("[output exceeded 10000 bytes; stopped]")).toBe(true);
    expect(text.length).toBeLessThanOrEqual(10_000 + 50);
  });

  it("keeps output of exactly the cap", async () => {
    const { text, metrics } = await run('import sys\nsys.stdout.write("y" * 5000)', { max_output_bytes: 5000 });
    expect(metrics["status"]).toBe("finished");
    expect(text).toBe("y".repeat(5000));
  });

  it("gives each run its own temporary directory and a clean environment", async () => {
    process.env["AGENTRL_TEST_SECRET"] = "leak";
    const { text } = await run('import os\nopen("f.txt", "w").write("x")\nprint(os.getcwd())\nprint(os.environ.get("AGENTRL_TEST_SECRET"))');
    delete process.env["AGENTRL_TEST_SECRET"];
    const [cwd, secret] = text.trim().split("\n");
    expect(cwd).toMatch(/agentrl-py-/);
    expect(existsSync(cwd as string)).toBe(false);
    expect(secret).toBe("None");
  });

  describe("network", () => {
    const server = countingServer();

    it("cannot reach a server on the host by default", async () => {
      const { text, metrics } = await run(`import socket\ns = socket.create_connection(("127.0.0.1", ${server.port()}), timeout=2)\nprint("connected", s.recv(5))`);
      expect(text).not.toContain("connected");
      expect(["namespace", "socket-patch"]).toContain(metrics["network"]);
      expect(server.connections()).toBe(0);
    });

    it("reaches it when allow_network is set", async () => {
      const { text, metrics } = await run(`import socket\ns = socket.create_connection(("127.0.0.1", ${server.port()}), timeout=2)\nprint("connected", s.recv(5))`, {
        allow_network: true,
      });
      expect(text).toBe("connected b'hello'\n");
      expect(metrics["network"]).toBe("allowed");
    });
  });
});

describe("resolveInterpreter", () => {
  it("finds bare names on agentrl's PATH and keeps paths as given", () => {
    expect(resolveInterpreter("sh", "/nonexistent:/bin")).toBe("/bin/sh");
    expect(resolveInterpreter("./venv/bin/python", "/bin")).toBe("./venv/bin/python");
    expect(resolveInterpreter("no-such-python", "/bin")).toBe("no-such-python");
  });
});

describe("python code tool through the runner", () => {
  let registry: ToolRegistry;
  const dir = tempDir("py-yaml");
  beforeAll(async () => {
    const file = path.join(dir, "py.yaml");
    writeFileSync(
      file,
      readFileSync(path.join(import.meta.dirname, "..", "tool-configs", "python_code_tool_config.yaml"), "utf8")
        .replace('python: "python3"', `python: "${VENV_PYTHON}"`)
        .replace("timeout_s: 10 ", "timeout_s: 2 "),
    );
    registry = await loadToolRegistry(file);
  });

  it("runs code from the shipped config", async () => {
    const outcome = await runToolCall(registry, { name: "code_interpreter", arguments: JSON.stringify({ code: "print(sum(range(10)))" }) });
    expect(outcome).toMatchObject({ text: "45\n", reward: 0.0, metrics: { errorKind: null, tool: { status: "finished" } } });
  });

  it("turns non-UTF-8 output into an error observation", async () => {
    const outcome = await runToolCall(registry, {
      name: "code_interpreter",
      arguments: JSON.stringify({ code: 'import sys\nsys.stdout.buffer.write(b"ok \\xff\\xfe")' }),
    });
    expect(outcome.text).toBe("Error when executing tool: output is not valid UTF-8");
    expect(outcome.metrics.errorKind).toBe("invalid_output");
  });

  it("reports a missing code argument as text", async () => {
    const outcome = await runToolCall(registry, { name: "code_interpreter", arguments: "{}" });
    expect(outcome.text).toBe("Error: parameter 'code' must be a string");
  });
});
