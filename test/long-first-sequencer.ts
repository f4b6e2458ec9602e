/**
 * The order test files start in. Vitest starts the largest files first when it has no timings cached, as on a clean
 * CI clone; the CPU demo's learning test is a small file that runs for about three minutes, so it started last and
 * ran alone at the end (about 90 s of the suite's wall time with one of two workers idle). The files that take
 * minutes start first; the rest keep vitest's order.
 */
import { BaseSequencer, type TestSpecification } from "vitest/node";

const LONG_FIRST = ["demo-learns", "train-faults", "train-demo", "inspect-e2e", "train-async"];

const rank = (spec: TestSpecification): number => {
  const index = LONG_FIRST.findIndex((name) => spec.moduleId.endsWith(`/${name}.test.ts`));
  return index < 0 ? LONG_FIRST.length : index;
};

export class LongFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    return sorted
      .map((spec, position) => ({ spec, position }))
      .sort((a, b) => rank(a.spec) - rank(b.spec) || a.position - b.position)
      .map(({ spec }) => spec);
  }
}
