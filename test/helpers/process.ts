import { readFileSync } from "node:fs";

/** Alive and not a zombie (a reparented zombie may never be reaped in a container without an init). */
export function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z";
  } catch {
    return false;
  }
}
