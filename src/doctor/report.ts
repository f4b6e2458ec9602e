/** The doctor's table and its one-line summary; --json prints the report object instead. */
import { makeTable, style, terminalWidth } from "../term.js";
import type { CheckStatus, DoctorReport } from "./types.js";

const MARK: Record<CheckStatus, string> = { pass: "pass", warn: "warn", fail: "FAIL", skip: "skip" };

function colored(status: CheckStatus, on: boolean): string {
  const text = MARK[status];
  if (status === "pass") return style.green(text, on);
  if (status === "warn") return style.yellow(text, on);
  if (status === "fail") return style.red(style.bold(text, on), on);
  return style.gray(text, on);
}

export function countStatuses(report: DoctorReport): Record<CheckStatus, number> {
  const counts: Record<CheckStatus, number> = { pass: 0, warn: 0, fail: 0, skip: 0 };
  for (const check of report.checks) counts[check.status] += 1;
  return counts;
}

export function formatDoctorReport(report: DoctorReport, color: boolean, width = terminalWidth()): string {
  const checkWidth = 34;
  const detailWidth = Math.max(30, width - checkWidth - 6 - 10);
  const table = makeTable(["check", "status", "detail"], { colWidths: [checkWidth, 8, detailWidth] });
  for (const check of report.checks) {
    const detail = check.hint ? `${check.detail}\n→ ${check.hint}` : check.detail;
    table.push([check.title, colored(check.status, color), detail]);
  }
  // cli-table3 wraps long cells only when asked to.
  (table.options as { wordWrap?: boolean; wrapOnWordBoundary?: boolean }).wordWrap = true;
  const counts = countStatuses(report);
  const verdict = counts.fail > 0 ? style.red("not ready", color) : counts.warn > 0 ? style.yellow("ready, with warnings", color) : style.green("ready", color);
  const summary = `doctor: ${counts.pass} pass, ${counts.warn} warn, ${counts.fail} fail, ${counts.skip} skipped: ${verdict}`;
  return `${style.dim(`model ${report.model}  server ${report.server}`, color)}\n${table.toString()}\n${summary}\n`;
}
