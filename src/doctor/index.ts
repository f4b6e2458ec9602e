/** `agentrl doctor`: the pre-flight checklist. See docs/serve-and-doctor.md. */
export { runDoctor, loadToolSchemas } from "./run-doctor.js";
export { resolveDoctorOptions, type DoctorFlags } from "./options.js";
export { formatDoctorReport, countStatuses } from "./report.js";
export { checkTemplateAndFormat, PROBE_TOOL, sampleArguments, roundTripMessages } from "./template-checks.js";
export type { CheckResult, CheckStatus, DoctorOptions, DoctorReport } from "./types.js";
