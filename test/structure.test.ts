/**
 * The shape of src/ (docs/architecture.md): dependencies point one way. src/cli only wires commander to each concern's
 * command, so nothing imports it; and no two folders import each other at run time, directly or around a loop, so each
 * folder can be read (and tested) knowing only the folders below it. Type-only imports are free: they vanish at run
 * time. The analysis reads the sources with the TypeScript parser, so it sees what the compiler sees.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";
import { REPO_ROOT } from "./helpers/cli.js";

const SRC = path.join(REPO_ROOT, "src");

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) return sourceFiles(full);
    return full.endsWith(".ts") ? [full] : [];
  });
}

/** The folder of src/ a file belongs to; files directly in src/ are "(root)", shared by all. */
function folderOf(file: string): string {
  const parts = path.relative(SRC, file).split(path.sep);
  return parts.length > 1 ? parts[0]! : "(root)";
}

function isTypeOnly(node: ts.ImportDeclaration | ts.ExportDeclaration): boolean {
  if (ts.isExportDeclaration(node)) return node.isTypeOnly;
  const clause = node.importClause;
  if (!clause) return false; // a side-effect import runs
  if (clause.isTypeOnly) return true;
  const bindings = clause.namedBindings;
  return !clause.name && bindings !== undefined && ts.isNamedImports(bindings) && bindings.elements.length > 0 && bindings.elements.every((e) => e.isTypeOnly);
}

interface Edge {
  from: string;
  to: string;
}

/**
 * Every run-time import of one src/ file by another, static or dynamic (`await import("../x.js")`); with `types`,
 * type-only imports too.
 */
function runtimeImports(types = false): Edge[] {
  const edges: Edge[] = [];
  for (const file of sourceFiles(SRC)) {
    const source = ts.createSourceFile(file, readFileSync(file, "utf8"), ts.ScriptTarget.ES2022, true);
    const add = (specifier: string) => {
      if (!specifier.startsWith(".")) return;
      edges.push({ from: file, to: path.resolve(path.dirname(file), specifier.replace(/\.js$/, ".ts")) });
    };
    const visit = (node: ts.Node): void => {
      if ((ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier)) {
        if (types || !isTypeOnly(node)) add(node.moduleSpecifier.text);
      } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
        const [arg] = node.arguments;
        if (arg && ts.isStringLiteral(arg)) add(arg.text);
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  return edges;
}

/** Strongly connected groups of more than one folder (Tarjan): each is a run-time import cycle between folders. */
function folderCycles(graph: Map<string, Set<string>>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const cycles: string[][] = [];
  let next = 0;
  const connect = (v: string): void => {
    index.set(v, next);
    low.set(v, next);
    next++;
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        connect(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const group: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      group.push(w);
    } while (w !== v);
    if (group.length > 1) cycles.push(group.sort());
  };
  for (const v of graph.keys()) if (!index.has(v)) connect(v);
  return cycles;
}

/** Functions (declarations, methods, constructors, accessors, arrow and function expressions) longer than `max` lines. */
function longFunctions(max: number): string[] {
  const found: string[] = [];
  for (const file of sourceFiles(SRC)) {
    const source = ts.createSourceFile(file, readFileSync(file, "utf8"), ts.ScriptTarget.ES2022, true);
    const visit = (node: ts.Node): void => {
      if (ts.isFunctionLike(node) && "body" in node && node.body) {
        const first = source.getLineAndCharacterOfPosition(node.getStart()).line;
        const last = source.getLineAndCharacterOfPosition(node.getEnd()).line;
        const name = (node as { name?: ts.Node }).name?.getText(source) ?? "(anonymous)";
        if (last - first + 1 > max) found.push(`${path.relative(SRC, file)}:${first + 1} ${name} (${last - first + 1} lines)`);
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  return found;
}

/** Calls of `process.exit(...)` in src/ (code, not text: the guardian's source string runs in its own process). */
function processExitCalls(): string[] {
  const found: string[] = [];
  for (const file of sourceFiles(SRC)) {
    const source = ts.createSourceFile(file, readFileSync(file, "utf8"), ts.ScriptTarget.ES2022, true);
    const visit = (node: ts.Node): void => {
      if (ts.isCallExpression(node) && node.expression.getText(source).replace(/\s/g, "") === "process.exit") {
        found.push(`${path.relative(SRC, file)}:${source.getLineAndCharacterOfPosition(node.getStart()).line + 1}`);
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  return found;
}

describe("src/ structure", () => {
  const edges = runtimeImports();

  it("sees the imports it checks (the analysis is not blind)", () => {
    const folders = new Set(edges.map((e) => `${folderOf(e.from)} -> ${folderOf(e.to)}`));
    expect(folders).toContain("cli -> rollout");
    expect(folders).toContain("rollout -> engine");
  });

  it("nothing outside src/cli imports from it, not even a type: the commands' flags are their stage's", () => {
    const intoCli = runtimeImports(true)
      .filter((e) => folderOf(e.to) === "cli" && folderOf(e.from) !== "cli")
      .map((e) => `${path.relative(SRC, e.from)} -> ${path.relative(SRC, e.to)}`);
    expect(intoCli).toEqual([]);
  });

  it("has no run-time import cycle between folders", () => {
    const graph = new Map<string, Set<string>>();
    for (const e of edges) {
      const [a, b] = [folderOf(e.from), folderOf(e.to)];
      if (a === b) continue;
      if (!graph.has(a)) graph.set(a, new Set());
      graph.get(a)!.add(b);
    }
    const cycles = folderCycles(graph).map((group) => {
      // Name the imports that close the cycle, so the message says where to cut.
      const inGroup = new Set(group);
      const links = edges
        .filter((e) => inGroup.has(folderOf(e.from)) && inGroup.has(folderOf(e.to)) && folderOf(e.from) !== folderOf(e.to))
        .map((e) => `${path.relative(SRC, e.from)} -> ${path.relative(SRC, e.to)}`);
      return { folders: group, imports: [...new Set(links)] };
    });
    expect(cycles).toEqual([]);
  });

  it("has no function longer than 80 lines: each stage reads in one screen", () => {
    expect(longFunctions(80)).toEqual([]);
    // The measure itself sees functions (it is not blind): many exceed a few lines.
    expect(longFunctions(10).length).toBeGreaterThan(20);
  });

  it("never ends the process: only bin/agentrl.js calls process.exit", () => {
    expect(processExitCalls()).toEqual([]);
    expect(readFileSync(path.join(REPO_ROOT, "bin", "agentrl.js"), "utf8")).toContain("process.exit(");
  });

  it("finds a cycle when there is one (the check can fail)", () => {
    const graph = new Map([
      ["a", new Set(["b"])],
      ["b", new Set(["c"])],
      ["c", new Set(["a"])],
      ["d", new Set(["a"])],
    ]);
    expect(folderCycles(graph)).toEqual([["a", "b", "c"]]);
  });
});
