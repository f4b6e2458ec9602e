/**
 * Prompts drawn from the data cursor and not yet trained on. With generation ahead of training (one_step_off,
 * fully_async) the cursor runs ahead of the last trained step, so a checkpoint saves the position of the earliest
 * draw still pending instead: a resumed run redoes what was generating, and skips nothing.
 */
import type { CursorState } from "./data-cursor.js";

const before = (a: CursorState, b: CursorState) => a.epoch < b.epoch || (a.epoch === b.epoch && a.offset < b.offset);

export class PendingDraws {
  private readonly open = new Map<number, CursorState>();
  private nextTicket = 0;

  /** A draw from `position` (the cursor before it); settle the ticket once its prompts are trained or dropped. */
  add(position: CursorState): number {
    const ticket = this.nextTicket++;
    this.open.set(ticket, { ...position });
    return ticket;
  }

  settle(ticket: number): void {
    this.open.delete(ticket);
  }

  /** Where a checkpoint's cursor stands: the earliest pending draw, else the cursor itself. */
  earliest(cursor: CursorState): CursorState {
    let out = cursor;
    for (const position of this.open.values()) if (before(position, out)) out = position;
    return { ...out };
  }
}
