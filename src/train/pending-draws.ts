/**
 * Prompts drawn from the data cursor and not yet trained on. With generation ahead of training (one_step_off,
 * fully_async) the cursor runs ahead of the last trained step, so a checkpoint saves the position of the earliest
 * draw still pending instead, with the later places already trained on (fully_async's groups finish out of order)
 * as its skip list: a resumed run redoes exactly what was still generating, and nothing else.
 */
import type { CursorState, DataCursor } from "./data-cursor.js";

interface Draw {
  /** The cursor's place when the draw began; it covers the places up to the next draw's start. */
  start: number;
  open: boolean;
}

export class PendingDraws {
  /** Draws by ticket, in the order they were drawn; settled ones are dropped once no open draw precedes them. */
  private readonly draws = new Map<number, Draw>();
  private nextTicket = 0;

  constructor(private readonly cursor: DataCursor) {}

  /** A draw from the cursor's place now; settle the ticket once its prompts are trained or dropped. */
  add(): number {
    const ticket = this.nextTicket++;
    this.draws.set(ticket, { start: this.cursor.place, open: true });
    return ticket;
  }

  settle(ticket: number): void {
    const draw = this.draws.get(ticket);
    if (draw) draw.open = false;
    // Settled draws before the earliest open one are behind any checkpoint: forget them.
    for (const [key, entry] of this.draws) {
      if (entry.open) break;
      this.draws.delete(key);
    }
  }

  /**
   * Where a checkpoint's cursor stands: the earliest open draw, skipping every later place that is not pending (its
   * draw settled, or the cursor passed over it); without open draws, the cursor itself.
   */
  checkpoint(): CursorState {
    const entries = [...this.draws.values()];
    const first = entries.findIndex((draw) => draw.open);
    if (first < 0) return this.cursor.position;
    const end = this.cursor.place;
    const skip: number[] = [];
    for (let i = first; i < entries.length; i++) {
      const until = entries[i + 1]?.start ?? end;
      for (let place = entries[i]!.start; place < until; place++) {
        if (!entries[i]!.open || this.cursor.passed.has(place)) skip.push(place);
      }
    }
    skip.push(...this.cursor.skippedFrom(end));
    return this.cursor.positionAt(entries[first]!.start, skip);
  }
}
