/**
 * Loads user classes (tools, interactions) named by a module path in a YAML `class_name`:
 * `path/to/file.js` (default export) or `path/to/file.js#ExportName`. A YAML file must not be able to run
 * arbitrary code anywhere on the machine, so a module is only loaded when its real path lies inside one of the
 * allowed module directories; with none, module paths are refused. rollout, train and doctor allow exactly one: the
 * folder of the YAML file that names the module (src/rollout/setup.ts). No flag adds others.
 */
import { realpathSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { InputError } from "../errors.js";

export interface ModulePathSpec {
  file: string;
  exportName: string | undefined;
}

/** True when a class_name is meant as a JS module path rather than a dotted built-in name. */
export function isModulePath(className: string): boolean {
  return /[\\/]/.test(className) || /\.(m?js|c?js|m?ts)(#.*)?$/.test(className);
}

export function parseModulePath(className: string): ModulePathSpec {
  const hash = className.lastIndexOf("#");
  if (hash === -1) return { file: className, exportName: undefined };
  return { file: className.slice(0, hash), exportName: className.slice(hash + 1) || undefined };
}

/** The simple class name verl would see: the export name, else the file's base name. */
export function simpleNameOf(className: string): string {
  if (!isModulePath(className)) return className.split(".").at(-1) ?? className;
  const spec = parseModulePath(className);
  return spec.exportName ?? path.basename(spec.file).replace(/\.[^.]+$/, "");
}

/** Where a module must live for rollout, train and doctor to load it. */
const YAML_FOLDER_HINT = "put the module in the folder of the YAML file that names it (or a subfolder): only modules there are loaded";

function isInside(child: string, parent: string): boolean {
  const rel = path.relative(parent, child);
  return rel === "" || (!rel.startsWith("..") && !path.isAbsolute(rel));
}

/**
 * The real path of `file` (relative to `baseDir`), which must lie inside one of `moduleDirs` (symlinks resolved).
 * Used for JS modules and Python tool files alike.
 */
export function resolveInsideModuleDirs(file: string, baseDir: string, moduleDirs: readonly string[], where: string): string {
  if (moduleDirs.length === 0) {
    throw new InputError(`${where}: class_name ${JSON.stringify(file)} is a module path, and no module directory is allowed`, {
      hint: YAML_FOLDER_HINT,
    });
  }
  const absolute = path.resolve(baseDir, file);
  let real: string;
  try {
    real = realpathSync(absolute);
  } catch {
    throw new InputError(`${where}: module ${JSON.stringify(file)} not found (looked at ${absolute})`);
  }
  const allowed = moduleDirs.map((dir) => {
    try {
      return realpathSync(path.resolve(dir));
    } catch {
      return path.resolve(dir);
    }
  });
  if (!allowed.some((dir) => isInside(real, dir))) {
    throw new InputError(`${where}: module ${real} is outside the allowed module directories (${allowed.join(", ")})`, {
      hint: YAML_FOLDER_HINT,
    });
  }
  return real;
}

/**
 * Imports the export a module path names, after checking it lies in an allowed directory.
 * `where` names the YAML file and entry for error messages; `baseDir` resolves relative paths (the YAML's folder).
 */
export async function loadModuleExport(className: string, baseDir: string, moduleDirs: readonly string[], where: string): Promise<unknown> {
  const spec = parseModulePath(className);
  if (/\.(c|m)?ts$/.test(spec.file)) {
    throw new InputError(`${where}: ${spec.file} is TypeScript, which Node 20 cannot import`, { hint: "compile it to .js and name the .js file" });
  }
  const real = resolveInsideModuleDirs(spec.file, baseDir, moduleDirs, where);
  let mod: Record<string, unknown>;
  try {
    mod = (await import(pathToFileURL(real).href)) as Record<string, unknown>;
  } catch (err) {
    throw new InputError(`${where}: cannot load module ${real}: ${(err as Error).message}`, { cause: err });
  }
  const name = spec.exportName ?? "default";
  if (!(name in mod)) {
    throw new InputError(`${where}: module ${real} has no export ${JSON.stringify(name)} (exports: ${Object.keys(mod).join(", ") || "none"})`);
  }
  return mod[name];
}
