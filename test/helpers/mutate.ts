/**
 * Random mutations for the tests that compare a hand-written fast path with its zod schema (engine-wire-fast-path,
 * openai-gateway-schema): the fast path must never accept what the schema refuses.
 */

/** A copy of `value` with one randomly chosen place (at any depth) replaced by one of `odd`, removed, or cut short. */
export function mutateOnePlace<T>(value: T, random: () => number, odd: readonly unknown[]): T {
  const copy = structuredClone(value) as Record<string, unknown>;
  const places: [Record<string, unknown> | unknown[], string | number][] = [];
  const walk = (node: unknown) => {
    if (Array.isArray(node)) node.forEach((child, i) => (places.push([node, i]), walk(child)));
    else if (typeof node === "object" && node !== null) {
      for (const [key, child] of Object.entries(node)) {
        places.push([node as Record<string, unknown>, key]);
        walk(child);
      }
    }
  };
  walk(copy);
  const [parent, key] = places[Math.floor(random() * places.length)]!;
  const roll = random();
  if (roll < 0.15 && !Array.isArray(parent)) delete (parent as Record<string, unknown>)[key as string];
  else if (roll < 0.25 && Array.isArray(parent)) parent.length = Number(key);
  else (parent as Record<string | number, unknown>)[key] = odd[Math.floor(random() * odd.length)];
  return copy as T;
}
