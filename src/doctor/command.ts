/** The `agentrl doctor` action: resolve options, run the checklist, print it, exit 1 on a failed check. */
import { ExitError } from "../errors.js";
import { colorEnabled } from "../term.js";
import { resolveDoctorOptions, type DoctorFlags } from "./options.js";
import { formatDoctorReport } from "./report.js";
import { runDoctor } from "./run-doctor.js";

export async function runDoctorCommand(flags: DoctorFlags): Promise<void> {
  const options = await resolveDoctorOptions(flags);
  const report = await runDoctor(options);
  if (flags.json) process.stdout.write(`${JSON.stringify(report)}\n`);
  else process.stdout.write(formatDoctorReport(report, colorEnabled()));
  if (!report.ok) throw new ExitError(1);
}
