/**
 * The list of matching trajectories: one light row each (never the token arrays), ordered by `--sort FIELD`
 * (`-FIELD` for descending) and cut to `--limit`. With a limit only the best `limit` rows are kept while
 * streaming, so sorting a 100k file holds `limit` rows, not 100k.
 */
import { UsageError } from "../errors.js";
import { FIELDS, fieldNamed, type FieldSpec, type FieldValue } from "./fields.js";
import { LIST_COLUMNS, sampledTokens, type TrajectoryRecord } from "./record.js";
import { fitTable, fmt, type Look } from "./output.js";

export interface ListRow {
  /** Position among the matching trajectories, in file order (what `show --index` takes). */
  index: number;
  id: string;
  group: string;
  data_source: string;
  status: string;
  finish: string;
  reward: number;
  advantage: number | null;
  turns: number;
  tool_calls: number;
  tool_errors: number;
  parse_errors: number;
  length: number;
  sampled: number;
  drift: string;
}

/** Reads the columns of LIST_COLUMNS only. */
export function listRow(t: TrajectoryRecord, index: number): ListRow {
  return {
    index,
    id: t.id,
    group: t.group_id,
    data_source: t.data_source,
    status: t.status,
    finish: t.finish_reason,
    reward: t.reward,
    advantage: t.advantage ?? null,
    turns: t.assistant_turns,
    tool_calls: t.tool_calls,
    tool_errors: t.tool_errors,
    parse_errors: t.parse_errors,
    length: t.response_ids.length,
    sampled: sampledTokens(t),
    drift: t.drift,
  };
}

export interface SortKey {
  field: string;
  descending: boolean;
  spec: FieldSpec;
}

export function parseSort(text: string): SortKey {
  const descending = text.startsWith("-");
  const name = text.replace(/^[-+]/, "");
  const field = fieldNamed(name);
  if (!field) {
    throw new UsageError(`--sort '${text}': unknown field '${name}'`, {
      hint: `sort by one of: ${Object.keys(FIELDS).join(", ")} (prefix - for descending, e.g. --sort -reward)`,
    });
  }
  return { field: field.name, descending, spec: field.spec };
}

interface Keyed {
  key: FieldValue;
  row: ListRow;
}

/** Missing values sort last either way; ties keep file order. */
function compareKeyed(sort: SortKey | null, a: Keyed, b: Keyed): number {
  if (sort) {
    if (a.key === null && b.key !== null) return 1;
    if (b.key === null && a.key !== null) return -1;
    if (a.key !== null && b.key !== null && a.key !== b.key) {
      const order = typeof a.key === "number" && typeof b.key === "number" ? a.key - b.key : String(a.key).localeCompare(String(b.key));
      return sort.descending ? -order : order;
    }
  }
  return a.row.index - b.row.index;
}

export class RowCollector {
  private readonly kept: Keyed[] = [];
  matched = 0;
  /** The columns `add` reads: the list row's and the sort field's. */
  readonly columns: string[];
  constructor(
    private readonly sort: SortKey | null,
    private readonly limit: number,
  ) {
    this.columns = [...LIST_COLUMNS, ...(sort ? sort.spec.columns : [])];
  }

  add(t: TrajectoryRecord, index: number): void {
    this.matched += 1;
    const keyed = { key: this.sort ? this.sort.spec.get(t) : null, row: listRow(t, index) };
    if (this.kept.length >= this.limit) {
      // Full: only a row that sorts before the current last one gets in.
      if (compareKeyed(this.sort, keyed, this.kept[this.kept.length - 1]!) >= 0) return;
      this.kept.pop();
    }
    let lo = 0;
    let hi = this.kept.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (compareKeyed(this.sort, this.kept[mid]!, keyed) <= 0) lo = mid + 1;
      else hi = mid;
    }
    this.kept.splice(lo, 0, keyed);
  }

  rows(): ListRow[] {
    return this.kept.map((k) => k.row);
  }
}

export function renderList(rows: ListRow[], matched: number, look: Look): string {
  // The advantage column only where a training step filled it in.
  const withAdvantage = rows.some((r) => r.advantage !== null);
  const table = fitTable(
    look,
    ["#", "id", "source", "reward", ...(withAdvantage ? ["adv"] : []), "turns", "calls", "err", "parse", "finish", "tokens", "mask=1", "drift"],
    rows.map((r) => [
      r.index, r.id, r.data_source, fmt(r.reward), ...(withAdvantage ? [fmt(r.advantage)] : []), r.turns, r.tool_calls,
      r.tool_errors, r.parse_errors, r.finish, r.length, r.sampled, r.drift,
    ]),
  );
  const more = matched > rows.length ? `\n${matched - rows.length} more match; raise --limit to see them` : "";
  return `${table}${more}\nshow one with: show ID, or show --index N (# column)`;
}
