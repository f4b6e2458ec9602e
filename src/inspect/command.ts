/**
 * `agentrl inspect PATH [summary|list|show ID]`: reads a trajectory file or a run folder and builds one view (a data
 * object, printed as text or as --json). Files are streamed: the summary keeps running statistics, the list keeps
 * `--limit` rows, `show` stops at its trajectory.
 */
import { promises as fs } from "node:fs";
import { InputError, UsageError } from "../errors.js";
import type { Trajectory } from "../data/trajectory.js";
import { buildDiff, renderDiff } from "./diff.js";
import { buildGroupView, renderGroup } from "./group.js";
import { parseSort, renderList, RowCollector, type ListRow } from "./list.js";
import { currentLook, emit, type Look } from "./output.js";
import { buildShowView, renderShow } from "./show.js";
import {
  describeSteps,
  readMetrics,
  resolveSource,
  rolloutSteps,
  runModelPath,
  stepRolloutFile,
  streamTrajectories,
  type Source,
} from "./source.js";
import { InspectStats, type InspectSummary } from "./summary.js";
import { renderSummary } from "./summary-view.js";
import { buildTokenView, renderTokens, type DecodeToken } from "./tokens.js";
import { curveOf, defaultCurves, metricKeys, renderCurves, runAlerts, type Curve } from "./curves.js";
import { renderBudget, stepBudget } from "./budget.js";
import { filterColumns, isFiltering, makeFilter, matches, type TrajectoryFilter } from "./where.js";
import { readTrajectoryRows, streamTrajectoryColumns } from "./columnar.js";
import { GAP_COLUMNS, SUMMARY_COLUMNS, type TrajectoryRecord } from "./record.js";

export const VIEWS = ["summary", "list", "show"] as const;
export type ViewName = (typeof VIEWS)[number];

export interface InspectFlags {
  where?: string[];
  grep?: string;
  sort?: string;
  limit?: number;
  index?: number;
  tokens?: boolean;
  full?: boolean;
  maxChars?: number;
  model?: string;
  group?: string;
  step?: number;
  diff?: string[];
  metric?: string[];
  json?: boolean;
  /** commander's --no-pager sets this to false. */
  pager?: boolean;
}

/** Rows listed under a filtered summary unless --limit says otherwise. */
const SUMMARY_LIST_LIMIT = 10;
const LIST_LIMIT = 50;

export async function runInspect(input: string, viewArg: string | undefined, idArg: string | undefined, flags: InspectFlags): Promise<void> {
  const view = parseView(viewArg, idArg, flags);
  // Validate every expression before reading anything: a typo fails fast, naming the flag.
  const filter = makeFilter(flags.where ?? [], flags.grep);
  const sort = flags.sort ? parseSort(flags.sort) : null;
  const look = currentLook();
  const source = await resolveSource(input);

  let text: string;
  let json: unknown;
  if (source.kind === "run" && flags.diff) {
    ({ text, json } = await diffView(source.dir, parseDiff(flags.diff), filter, look));
  } else if (source.kind === "run" && flags.step === undefined && view === "summary" && flags.group === undefined && !isFiltering(filter) && !sort && flags.limit === undefined) {
    ({ text, json } = await runOverview(source.dir, flags.metric ?? [], look));
  } else {
    if (flags.diff) throw new UsageError("--diff compares two steps of a run folder; PATH is a trajectory file");
    if (flags.metric?.length && source.kind === "file") throw new UsageError("--metric draws run-folder curves; PATH is a trajectory file");
    const { file, title } = await trajectoryFile(source, flags.step);
    if (flags.group !== undefined) ({ text, json } = await groupView(file, flags.group, filter, look, flags.maxChars ?? 200));
    else if (view === "show") ({ text, json } = await showView(file, source, idArg, flags, filter, look));
    else if (view === "list") ({ text, json } = await listView(file, title, filter, sort, flags.limit ?? LIST_LIMIT, look));
    else ({ text, json } = await summaryView(file, title, filter, sort, flags.limit, look));
  }
  if (flags.json) process.stdout.write(`${JSON.stringify(json, null, 2)}\n`);
  else await emit(text, { pager: flags.pager !== false });
}

function parseView(viewArg: string | undefined, idArg: string | undefined, flags: InspectFlags): ViewName {
  if (viewArg === undefined) {
    if (flags.index !== undefined || flags.tokens) return "show";
    return "summary";
  }
  if (!(VIEWS as readonly string[]).includes(viewArg)) {
    throw new UsageError(`unknown view '${viewArg}'`, { hint: `use one of: ${VIEWS.join(", ")} (e.g. agentrl inspect FILE show 0:1)` });
  }
  if (idArg !== undefined && viewArg !== "show") throw new UsageError(`'${viewArg}' takes no trajectory id`);
  return viewArg as ViewName;
}

function parseDiff(values: string[]): [number, number] {
  const steps = values.map(Number);
  if (steps.length !== 2 || steps.some((s) => !Number.isInteger(s) || s < 0)) {
    throw new UsageError(`--diff takes two step numbers, got '${values.join(" ")}'`, { hint: "e.g. --diff 1 20" });
  }
  return steps as [number, number];
}

async function trajectoryFile(source: Source, step: number | undefined): Promise<{ file: string; title: string }> {
  if (source.kind === "file") {
    if (step !== undefined) throw new UsageError("--step picks a step of a run folder; PATH is a trajectory file");
    return { file: source.file, title: source.file };
  }
  let chosen = step;
  if (chosen === undefined) {
    const steps = await rolloutSteps(source.dir);
    if (steps.length === 0) throw new InputError(`${source.dir}: this run folder has no rollouts yet`);
    chosen = steps[steps.length - 1]!;
  }
  return { file: await stepRolloutFile(source.dir, chosen), title: `${source.dir} · step ${chosen}` };
}

/** Streams the trajectories that pass the filter, with their position among the matches. */
async function* matching(file: string, filter: TrajectoryFilter): AsyncGenerator<{ t: Trajectory; index: number }> {
  let index = 0;
  for await (const t of streamTrajectories(file)) {
    if (!matches(filter, t)) continue;
    yield { t, index: index++ };
  }
}

/**
 * Like `matching`, for views that read only some columns: a finished parquet file is read column-projected
 * (src/inspect/columnar.ts), anything else (JSONL, an unfinished .parts folder, --grep over the text) whole.
 */
async function* matchingRecords(file: string, filter: TrajectoryFilter, columns: readonly string[]): AsyncGenerator<{ t: TrajectoryRecord; index: number }> {
  if (!(await canProject(file, filter))) {
    yield* matching(file, filter);
    return;
  }
  let index = 0;
  for await (const t of streamTrajectoryColumns(file, [...columns, ...filterColumns(filter)])) {
    if (!matches(filter, t)) continue;
    yield { t, index: index++ };
  }
}

async function canProject(file: string, filter: TrajectoryFilter): Promise<boolean> {
  if (filter.grep !== null || !file.endsWith(".parquet")) return false;
  // readTrajectories prefers an unfinished .parts folder over the file: so must we.
  return !(await fs.stat(`${file}.parts`).then(() => true, () => false));
}

function filterJson(filter: TrajectoryFilter) {
  return { where: filter.where.map((c) => c.text), grep: filter.grep };
}

async function summarise(file: string, filter: TrajectoryFilter, collector: RowCollector | null): Promise<InspectSummary> {
  const stats = new InspectStats();
  const columns = [...SUMMARY_COLUMNS, ...(collector ? collector.columns : [])];
  for await (const { t, index } of matchingRecords(file, filter, columns)) {
    stats.add(t);
    collector?.add(t, index);
  }
  // Behaviour log-probs are read in a second pass, and only when trainer log-probs are there to compare with.
  if (stats.trainerLogprobCount > 0) {
    for await (const { t } of matchingRecords(file, filter, GAP_COLUMNS)) stats.addLogprobGap(t);
  }
  return stats.summary();
}

async function summaryView(file: string, title: string, filter: TrajectoryFilter, sort: ReturnType<typeof parseSort> | null, limit: number | undefined, look: Look) {
  const listing = isFiltering(filter) || sort !== null || limit !== undefined;
  const collector = listing ? new RowCollector(sort, limit ?? SUMMARY_LIST_LIMIT) : null;
  const summary = await summarise(file, filter, collector);
  const heading = isFiltering(filter) ? `${title} · ${summary.overall.count} matching ${describeFilter(filter)}` : title;
  let text = renderSummary(summary, look, heading);
  if (collector) text += `\n${renderList(collector.rows(), collector.matched, look)}`;
  const json = {
    path: file,
    filters: filterJson(filter),
    summary,
    ...(collector ? { matches: { count: collector.matched, rows: collector.rows() } } : {}),
  };
  return { text, json };
}

function describeFilter(filter: TrajectoryFilter): string {
  return [...filter.where.map((c) => c.text), ...(filter.grep !== null ? [`grep "${filter.grep}"`] : [])].join(", ");
}

async function listView(file: string, title: string, filter: TrajectoryFilter, sort: ReturnType<typeof parseSort> | null, limit: number, look: Look) {
  const collector = new RowCollector(sort, limit);
  for await (const { t, index } of matchingRecords(file, filter, collector.columns)) collector.add(t, index);
  const rows: ListRow[] = collector.rows();
  const heading = `${title} · ${collector.matched} trajector${collector.matched === 1 ? "y" : "ies"}${isFiltering(filter) ? ` matching ${describeFilter(filter)}` : ""}`;
  return {
    text: `${heading}\n${renderList(rows, collector.matched, look)}`,
    json: { path: file, filters: filterJson(filter), matched: collector.matched, rows },
  };
}

/**
 * The file rows (0-based) of the matching records that `pick` selects, read column-projected; `stop` ends the scan
 * early. Only for files canProject accepts.
 */
async function projectedRows(
  file: string,
  filter: TrajectoryFilter,
  columns: readonly string[],
  pick: (t: TrajectoryRecord, matchIndex: number) => boolean,
  stop: (picked: number) => boolean,
): Promise<{ rows: number[]; matched: number }> {
  const rows: number[] = [];
  let fileRow = 0;
  let matched = 0;
  for await (const t of streamTrajectoryColumns(file, [...columns, ...filterColumns(filter)])) {
    const row = fileRow++;
    if (!matches(filter, t)) continue;
    if (pick(t, matched++)) rows.push(row);
    if (stop(rows.length)) break;
  }
  return { rows, matched };
}

async function findTrajectory(file: string, filter: TrajectoryFilter, id: string | undefined, index: number | undefined): Promise<Trajectory> {
  let seen = 0;
  const wanted = (t: TrajectoryRecord, i: number) => (id !== undefined ? t.id === id : i === index);
  if (await canProject(file, filter)) {
    // Scan the id column only, then read the one row whole.
    const { rows, matched } = await projectedRows(file, filter, ["id"], wanted, (n) => n > 0);
    if (rows.length) return (await readTrajectoryRows(file, rows))[0]!;
    seen = matched;
  } else {
    for await (const { t, index: i } of matching(file, filter)) {
      seen += 1;
      if (wanted(t, i)) return t;
    }
  }
  const which = id !== undefined ? `id '${id}'` : `index ${index}`;
  throw new InputError(`${file}: no trajectory with ${which} (${seen} trajector${seen === 1 ? "y" : "ies"} ${isFiltering(filter) ? "match the filters" : "in the file"})`, {
    hint: "list ids with: agentrl inspect PATH list",
  });
}

async function showView(file: string, source: Source, idArg: string | undefined, flags: InspectFlags, filter: TrajectoryFilter, look: Look) {
  if (idArg === undefined && flags.index === undefined) {
    throw new UsageError("show needs a trajectory: show ID or show --index N", { hint: "list them with: agentrl inspect PATH list" });
  }
  if (idArg !== undefined && flags.index !== undefined) throw new UsageError("give show either an ID or --index N, not both");
  const t = await findTrajectory(file, filter, idArg, flags.index);
  if (flags.tokens) {
    const decode = await tokenDecoder(flags.model ?? (source.kind === "run" ? await runModelPath(source.dir) : null));
    const view = buildTokenView(t, decode);
    return { text: renderTokens(view, look, { decoded: decode !== null }), json: view };
  }
  const view = buildShowView(t);
  return { text: renderShow(view, look, { full: Boolean(flags.full), maxChars: flags.maxChars ?? 400 }), json: view };
}

async function tokenDecoder(modelDir: string | null): Promise<DecodeToken | null> {
  if (!modelDir) return null;
  const { loadChatModel } = await import("../chat/index.js");
  const model = await loadChatModel(modelDir);
  return (id) => model.decode([id]);
}

async function groupView(file: string, group: string, filter: TrajectoryFilter, look: Look, maxChars: number) {
  let members: Trajectory[] = [];
  let groups = 0;
  const seenGroups = new Set<string>();
  const note = (t: TrajectoryRecord) => {
    if (seenGroups.size < 1000) seenGroups.add(t.group_id);
    groups += 1;
    return t.group_id === group;
  };
  if (await canProject(file, filter)) {
    // Scan the group column only, then read the group's rows whole.
    const { rows } = await projectedRows(file, filter, ["group_id"], note, () => false);
    members = await readTrajectoryRows(file, rows);
  } else {
    for await (const { t } of matching(file, filter)) if (note(t)) members.push(t);
  }
  if (members.length === 0) {
    const some = [...seenGroups].slice(0, 10).join(", ");
    throw new InputError(`${file}: no trajectories in group '${group}'`, { hint: groups ? `groups here include: ${some}` : "the file has no trajectories" });
  }
  const view = buildGroupView(group, members);
  return { text: renderGroup(view, look, maxChars), json: view };
}

async function runOverview(dir: string, metricNames: string[], look: Look) {
  const rows = await readMetrics(dir);
  const steps = await rolloutSteps(dir);
  const names = metricNames.length ? metricNames : defaultCurves(rows);
  const curves: Curve[] = [];
  for (const name of names) {
    const curve = curveOf(name, rows);
    if (curve) curves.push(curve);
    else if (metricNames.length) {
      const known = metricKeys(rows);
      throw new UsageError(`--metric '${name}': not in ${dir}/metrics.jsonl`, {
        hint: known.length ? `metrics here: ${known.slice(0, 30).join(", ")}` : "metrics.jsonl has no metrics yet",
      });
    }
  }
  const alerts = runAlerts(rows);
  const lastStep = rows.at(-1)?.step ?? null;
  const budget = stepBudget(rows);
  const text = [
    `run ${dir} · ${rows.length} step${rows.length === 1 ? "" : "s"} of metrics${lastStep !== null ? ` (last: step ${lastStep})` : ""}`,
    renderCurves(curves, alerts, look, { charts: metricNames.length > 0 }),
    // The overview's, not --metric's charts.
    ...(budget && metricNames.length === 0 ? [renderBudget(budget, look)] : []),
    steps.length
      ? `rollouts for steps: ${describeSteps(steps)} · inspect one with --step K, compare two with --diff K1 K2`
      : "no rollouts saved yet",
  ].join("\n");
  return { text, json: { path: dir, steps: rows.map((r) => r.step), rollout_steps: steps, curves, alerts, budget } };
}

async function diffView(dir: string, steps: [number, number], filter: TrajectoryFilter, look: Look) {
  const available = new Set(await rolloutSteps(dir));
  const metrics = await readMetrics(dir);
  if (!steps.every((s) => available.has(s) || metrics.some((m) => m.step === s))) {
    throw new InputError(`${dir}: step ${steps.filter((s) => !available.has(s) && !metrics.some((m) => m.step === s)).join(" and ")} has neither rollouts nor metrics`, {
      hint: available.size ? `steps with rollouts: ${describeSteps([...available].sort((a, b) => a - b))}` : undefined,
    });
  }
  const summaries = await Promise.all(
    steps.map(async (s) => (available.has(s) ? summarise(await stepRolloutFile(dir, s), filter, null) : null)),
  );
  const view = buildDiff(steps, summaries as [InspectSummary | null, InspectSummary | null], metrics);
  return { text: `run ${dir} · step ${steps[0]} vs step ${steps[1]}\n${renderDiff(view, look)}`, json: view };
}
