/**
 * rollout-overhead.mjs's distinct-conversations cell, once: n = 1 over `trajectories` GSM8K questions at `concurrency`
 * (distinct turns and tool answers from the fake's GSM8K-derived texts, which needs the seed set here), strict drift
 * check, the trajectories written to a parquet file as `agentrl rollout` writes them (the writer's close included).
 * `tree` is what a bench loaded from one built tree: its gsm8k-tool-workload.mjs as `lib`, and runRollout,
 * makeClient and openTrajectoryWriter from its dist/. Resolves to the turns played; throws when a trajectory did not
 * play the story out with a drift match. The file is removed after.
 *
 * The questions come from `tree.cursor` (gsm8k-tool-workload.mjs's promptCursor, made on the first call when the tree
 * has none): every run of a tree asks questions that tree has not seen, as each step of a real run does. A tree
 * loaded from an older checkout whose workload has no cursor gets one from this checkout's workload: the rows are
 * plain verl rows either tree reads.
 */
import { rmSync } from "node:fs";

export async function playDistinctCell(tree, url, file, { concurrency, trajectories }) {
  tree.cursor ??= (tree.lib.promptCursor ?? (await import("./gsm8k-tool-workload.mjs")).promptCursor)();
  const config = tree.lib.toolRollout(concurrency, { n: 1, seed: 7 });
  config.server.urls = [url];
  const client = tree.makeClient(config, undefined);
  const writer = await tree.openTrajectoryWriter(file);
  let turns = 0;
  let bad = 0;
  try {
    await tree.runRollout({
      prompts: tree.cursor.next(trajectories),
      n: 1,
      concurrency,
      context: tree.lib.contextFor(client, config),
      writer,
      onTrajectory: (t) => {
        turns += t.assistant_turns;
        if (t.status !== "completed" || t.assistant_turns !== 2 || t.drift !== "match") bad++;
      },
    });
    await writer.close();
  } finally {
    await client.close();
    rmSync(writer.file, { force: true });
  }
  if (bad > 0) throw new Error(`${bad} of ${trajectories} trajectories did not play the story out with a drift match`);
  return turns;
}
