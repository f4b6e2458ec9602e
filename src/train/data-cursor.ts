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
  constructor(
    private readonly size: number,
    private readonly seed: number,
    private readonly shuffle: boolean,
    private state: CursorState = { epoch: 0, offset: 0 },
  ) {
    if (size <= 0) throw new Error("the training set is empty");
    this.order = epochOrder(size, seed, state.epoch, shuffle);
  }

  get position(): CursorState {
    return { ...this.state };
  }

  /** Goes back to an earlier position (a step that did not finish gives its prompts back). */
  restore(state: CursorState): void {
    this.state = { ...state };
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
      out.push(this.order[this.state.offset]!);
      this.state.offset += 1;
    }
    return out;
  }
}
