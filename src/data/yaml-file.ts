import { load as loadYaml } from "js-yaml";
import { InputError } from "../errors.js";
import { readTextFile } from "./text-file.js";

/**
 * Reads and parses a YAML file (a config, a tool or interaction config) as strict UTF-8. Every error names the file:
 * an OS error in words, a byte that is not UTF-8 with its line, a syntax error with js-yaml's line and column.
 */
export async function readYamlFile(file: string): Promise<unknown> {
  const text = await readTextFile(file);
  try {
    return loadYaml(text);
  } catch (err) {
    throw new InputError(`${file}: not valid YAML: ${(err as Error).message.split("\n")[0]}`, { cause: err });
  }
}
