/**
 * The order in which training prompts are used: a seeded permutation per epoch, consumed in batches. Its state is
 * two integers, saved in every checkpoint, so a resumed run uses exactly the prompts an uninterrupted one would:
 * none skipped, none repeated.
 */
import { seededRandom } from "../data/random.js";

export interface CursorState {
  epoch: number;
  /** Prompts of the current epoch's permutation already handed out. */
  offset: number;
  /**
   * Places ahead of this one (epoch × size + offset) already trained on: with fully_async, groups finish out of order,
   * so a checkpoint at the earliest untrained prompt lists those after it that were trained; next() passes over them.
   */
  skip?: number[];
}

export function epochOrder(size: number, seed: number, epoch: number, shuffle: boolean): number[] {
  const order = Array.from({ length: size }, (_, i) => i);
  if (!shuffle) return order;
  const rand = seededRandom(seed * 1_000_003 + epoch);
  for (let i = size - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [order[i], order[j]] = [order[j]!, order[i]!];
  }
  return order;
}

export class DataCursor {
  private order: number[];
  private state: { epoch: number; offset: number };
  /** Places still to pass over (CursorState.skip). */
  private skip: Set<number>;
  /** Places passed over since the last restore: no longer ahead, but a checkpoint behind them must list them again. */
  readonly passed = new Set<number>();

  constructor(
    private readonly size: number,
    private readonly seed: number,
    private readonly shuffle: boolean,
    state: CursorState = { epoch: 0, offset: 0 },
  ) {
    if (size <= 0) throw new Error("the training set is empty");
    this.state = { epoch: state.epoch, offset: state.offset };
    this.skip = new Set(state.skip ?? []);
    this.order = epochOrder(size, seed, state.epoch, shuffle);
  }

  get position(): CursorState {
    const skip = [...this.skip].sort((a, b) => a - b);
    return { ...this.state, ...(skip.length > 0 ? { skip } : {}) };
  }

  /** The place of the next prompt handed out: epoch × size + offset, one number that orders places across epochs. */
  get place(): number {
    return placeOf(this.state, this.size);
  }

  /** Goes back to an earlier position (a step that did not finish gives its prompts back). */
  restore(state: CursorState): void {
    this.state = { epoch: state.epoch, offset: state.offset };
    this.skip = new Set(state.skip ?? []);
    this.passed.clear();
    this.order = epochOrder(this.size, this.seed, this.state.epoch, this.shuffle);
  }

  /** The next `count` prompt indices, crossing into the next epoch (a new permutation) when this one runs out. */
  next(count: number): number[] {
    const out: number[] = [];
    while (out.length < count) {
      if (this.state.offset >= this.size) {
        this.state = { epoch: this.state.epoch + 1, offset: 0 };
        this.order = epochOrder(this.size, this.seed, this.state.epoch, this.shuffle);
      }
      const place = this.place;
      if (this.skip.delete(place)) this.passed.add(place);
      else out.push(this.order[this.state.offset]!);
      this.state.offset += 1;
    }
    return out;
  }

  /** The position at `place` (a place at or after this cursor's, as the cursor would reach it). */
  positionAt(place: number, skip: readonly number[]): CursorState {
    const state = { epoch: Math.floor(place / this.size), offset: place % this.size };
    return skip.length > 0 ? { ...state, skip: [...skip] } : state;
  }

  /** Places still to pass over at or after `place`. */
  skippedFrom(place: number): number[] {
    return [...this.skip].filter((p) => p >= place);
  }
}

/** epoch × size + offset: the order of places across epochs. */
export function placeOf(state: { epoch: number; offset: number }, size: number): number {
  return state.epoch * size + state.offset;
}
