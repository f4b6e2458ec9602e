/**
 * The inspect summary: RolloutStats (the numbers the rollout prints) overall and per data source, plus what a
 * reader of a whole file wants on top: per-tool error rates and latency percentiles, the response-length
 * distribution, tool calls per trajectory, and which trajectories drifted or have nothing to train on.
 * Everything is a running accumulator with bounded memory, so a 100k-trajectory file streams through it.
 */
import { RolloutStats, type RolloutSummary } from "../rollout/stats.js";
import { sampledTokens, type TrajectoryRecord } from "./record.js";
import { countsStaleness, tokensByVersion } from "../data/version-spans.js";

/** How many ids of drifted / empty-mask trajectories a summary names (the counts stay exact). */
export const LISTED_IDS = 20;

/**
 * Keeps every value up to `capacity`, then a uniform sample of them (Algorithm R with a fixed seed, so the same
 * file always gives the same percentiles). Percentiles are exact for files with fewer values than the capacity.
 */
export class Reservoir {
  private readonly values: number[] = [];
  private seen = 0;
  private seed = 0x9e3779b9;
  constructor(private readonly capacity = 50_000) {}

  add(value: number): void {
    this.seen += 1;
    if (this.values.length < this.capacity) {
      this.values.push(value);
      return;
    }
    const slot = Math.floor(this.random() * this.seen);
    if (slot < this.capacity) this.values[slot] = value;
  }

  /** Nearest-rank percentile (p in [0, 100]); 0 when empty. */
  percentiles(ps: readonly number[]): number[] {
    if (this.values.length === 0) return ps.map(() => 0);
    const sorted = Float64Array.from(this.values).sort();
    return ps.map((p) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!);
  }

  private random(): number {
    // mulberry32
    this.seed = (this.seed + 0x6d2b79f5) | 0;
    let x = this.seed;
    x = Math.imul(x ^ (x >>> 15), x | 1);
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61);
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  }
}

export interface ToolSummary {
  name: string;
  /** Every call record with this name, parse failures included. */
  attempts: number;
  /** Calls that ran (not parse failures). */
  executed: number;
  errors: number;
  parseErrors: number;
  /** errors / executed */
  errorRate: number;
  /** parseErrors / attempts */
  parseErrorRate: number;
  /** Error kinds and how often each happened. */
  errorKinds: Record<string, number>;
  latencyMs: { p50: number; p95: number; max: number };
}

export interface SourceSummary {
  dataSource: string;
  count: number;
  reward: RolloutSummary["reward"];
  accuracy: number;
}

export interface LengthBucket {
  /** Inclusive lower and exclusive upper bound in tokens. */
  from: number;
  to: number;
  count: number;
}

export interface InspectSummary {
  overall: RolloutSummary;
  byDataSource: SourceSummary[];
  tools: ToolSummary[];
  /** tool calls (executed) per trajectory → trajectories */
  toolCallsHistogram: Record<string, number>;
  responseLength: { mean: number; min: number; p50: number; p95: number; max: number; histogram: LengthBucket[] };
  drift: { count: number; ids: string[] };
  emptyMask: { count: number; ids: string[] };
  /** Present when the trajectories carry GRPO advantages (run folders). */
  advantage: { count: number; mean: number; min: number; max: number } | null;
  /** Present when the trajectories carry the trainer's log-probs: |trainer - behaviour| over sampled tokens. */
  logprobGap: { tokens: number; meanAbs: number; maxAbs: number; maxId: string } | null;
  /**
   * Present when the trajectories record version_spans: sampled tokens per weight version, the trajectories continued
   * across a weight update (partial rollouts), and the token staleness at training (training steps' rollouts only).
   */
  weightVersions: {
    /** In the order the versions first appear (an object would sort numeric names first). */
    tokens: Array<{ version: string; tokens: number }>;
    continued: number;
    staleness: { mean: number; max: number } | null;
  } | null;
}

class ToolAccumulator {
  attempts = 0;
  executed = 0;
  errors = 0;
  parseErrors = 0;
  maxLatency = 0;
  readonly errorKinds: Record<string, number> = {};
  readonly latencies = new Reservoir(20_000);
}

/** Response-length buckets: [0, 64), [64, 128), [128, 256), ... doubling, so a few rows cover any budget. */
function bucketOf(length: number): number {
  return length < 64 ? 0 : Math.floor(Math.log2(length)) - 5;
}
const bucketFrom = (b: number) => (b === 0 ? 0 : 2 ** (b + 5));
const bucketTo = (b: number) => 2 ** (b + 6);

export class InspectStats {
  private readonly overall = new RolloutStats();
  private readonly bySource = new Map<string, RolloutStats>();
  private readonly tools = new Map<string, ToolAccumulator>();
  private readonly toolCallsHistogram: Record<string, number> = {};
  private readonly lengths = new Reservoir();
  private readonly lengthBuckets = new Map<number, number>();
  private lengthMin = Infinity;
  private driftIds: string[] = [];
  private emptyIds: string[] = [];
  private advantageCount = 0;
  private advantageSum = 0;
  private advantageMin = Infinity;
  private advantageMax = -Infinity;
  private gapTokens = 0;
  private gapSum = 0;
  private gapMax = 0;
  private gapMaxId = "";
  private withTrainerLogprobs = 0;
  private readonly versionTokens = new Map<string, number>();
  private withVersions = 0;
  private continued = 0;
  private staleTokens = 0;
  private staleSum = 0;
  private staleMax = 0;

  get size(): number {
    return this.overall.size;
  }

  /** Reads the columns of SUMMARY_COLUMNS only. */
  add(t: TrajectoryRecord): void {
    this.overall.add(t);
    let source = this.bySource.get(t.data_source);
    if (!source) this.bySource.set(t.data_source, (source = new RolloutStats()));
    source.add(t);

    for (const call of t.calls) {
      const name = call.name || "(unparsed)";
      let tool = this.tools.get(name);
      if (!tool) this.tools.set(name, (tool = new ToolAccumulator()));
      tool.attempts += 1;
      if (call.error_kind) tool.errorKinds[call.error_kind] = (tool.errorKinds[call.error_kind] ?? 0) + 1;
      if (call.error_kind?.startsWith("parse:")) {
        tool.parseErrors += 1;
        continue;
      }
      tool.executed += 1;
      if (call.error_kind) tool.errors += 1;
      tool.latencies.add(call.latency_ms);
      tool.maxLatency = Math.max(tool.maxLatency, call.latency_ms);
    }
    const calls = String(t.tool_calls);
    this.toolCallsHistogram[calls] = (this.toolCallsHistogram[calls] ?? 0) + 1;

    const length = t.response_ids.length;
    this.lengths.add(length);
    this.lengthMin = Math.min(this.lengthMin, length);
    const bucket = bucketOf(length);
    this.lengthBuckets.set(bucket, (this.lengthBuckets.get(bucket) ?? 0) + 1);

    if (t.drift === "drift" && this.driftIds.length < LISTED_IDS) this.driftIds.push(t.id);
    if (sampledTokens(t) === 0 && this.emptyIds.length < LISTED_IDS) this.emptyIds.push(t.id);

    if (t.advantage !== null && t.advantage !== undefined) {
      this.advantageCount += 1;
      this.advantageSum += t.advantage;
      this.advantageMin = Math.min(this.advantageMin, t.advantage);
      this.advantageMax = Math.max(this.advantageMax, t.advantage);
    }
    if (t.trainer_logprobs) this.withTrainerLogprobs += 1;
    if (t.version_spans) this.addVersions(t as Pick<TrajectoryRecord, "version_spans" | "step">);
  }

  private addVersions(t: Pick<TrajectoryRecord, "version_spans" | "step">): void {
    this.withVersions += 1;
    const counts = tokensByVersion(t);
    if (counts.size > 1) this.continued += 1;
    for (const [version, n] of counts) {
      const key = version ?? "(none)";
      this.versionTokens.set(key, (this.versionTokens.get(key) ?? 0) + n);
    }
    if (t.step === null || t.step === undefined) return;
    const { tokens, weighted, max } = countsStaleness(counts, t.step - 1);
    this.staleTokens += tokens;
    this.staleSum += weighted;
    this.staleMax = Math.max(this.staleMax, max);
  }

  /** Trajectories added so far that carry trainer log-probs: their gap needs addLogprobGap. */
  get trainerLogprobCount(): number {
    return this.withTrainerLogprobs;
  }

  /** Adds the trainer-vs-behaviour log-prob gap of one trajectory (reads GAP_COLUMNS only). */
  addLogprobGap(t: Pick<TrajectoryRecord, "id" | "response_mask" | "response_logprobs" | "trainer_logprobs">): void {
    const trainer = t.trainer_logprobs;
    if (trainer) {
      for (let i = 0; i < t.response_mask.length; i++) {
        if (t.response_mask[i] !== 1) continue;
        const gap = Math.abs((trainer[i] ?? 0) - (t.response_logprobs[i] ?? 0));
        this.gapTokens += 1;
        this.gapSum += gap;
        if (gap > this.gapMax) {
          this.gapMax = gap;
          this.gapMaxId = t.id;
        }
      }
    }
  }

  summary(): InspectSummary {
    const overall = this.overall.summary();
    const [p50, p95] = this.lengths.percentiles([50, 95]);
    return {
      overall,
      byDataSource: [...this.bySource]
        .sort((a, b) => a[0].localeCompare(b[0]))
        .map(([dataSource, stats]) => {
          const s = stats.summary();
          return { dataSource, count: s.count, reward: s.reward, accuracy: s.accuracy };
        }),
      tools: [...this.tools]
        .sort((a, b) => b[1].attempts - a[1].attempts || a[0].localeCompare(b[0]))
        .map(([name, tool]) => {
          const [l50, l95] = tool.latencies.percentiles([50, 95]);
          return {
            name,
            attempts: tool.attempts,
            executed: tool.executed,
            errors: tool.errors,
            parseErrors: tool.parseErrors,
            errorRate: tool.executed ? tool.errors / tool.executed : 0,
            parseErrorRate: tool.attempts ? tool.parseErrors / tool.attempts : 0,
            errorKinds: { ...tool.errorKinds },
            latencyMs: { p50: l50!, p95: l95!, max: tool.maxLatency },
          };
        }),
      toolCallsHistogram: { ...this.toolCallsHistogram },
      responseLength: {
        mean: overall.responseTokens.mean,
        min: overall.count ? this.lengthMin : 0,
        p50: p50!,
        p95: p95!,
        max: overall.responseTokens.max,
        histogram: [...this.lengthBuckets]
          .sort((a, b) => a[0] - b[0])
          .map(([b, count]) => ({ from: bucketFrom(b), to: bucketTo(b), count })),
      },
      drift: { count: overall.driftCount, ids: [...this.driftIds] },
      emptyMask: { count: overall.emptyMaskCount, ids: [...this.emptyIds] },
      advantage: this.advantageCount
        ? {
            count: this.advantageCount,
            mean: this.advantageSum / this.advantageCount,
            min: this.advantageMin,
            max: this.advantageMax,
          }
        : null,
      logprobGap: this.gapTokens
        ? { tokens: this.gapTokens, meanAbs: this.gapSum / this.gapTokens, maxAbs: this.gapMax, maxId: this.gapMaxId }
        : null,
      weightVersions: this.withVersions
        ? {
            tokens: [...this.versionTokens].map(([version, tokens]) => ({ version, tokens })),
            continued: this.continued,
            staleness: this.staleTokens ? { mean: this.staleSum / this.staleTokens, max: this.staleMax } : null,
          }
        : null,
    };
  }
}
