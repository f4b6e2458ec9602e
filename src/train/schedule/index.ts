export { runSchedule } from "./schedule.js";
export { maxStaleness, TRAINING_MODES, type TrainingMode } from "./modes.js";
export type { FullyAsyncPlan, Generator, GroupResult, ScheduleOptions, ScheduleResult, StepReport, Trainer } from "./types.js";
export { stepScheduleMetrics } from "./metrics.js";
