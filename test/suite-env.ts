/**
 * The variables every test worker gets (vitest.config.ts `test.env`), and so every process a test starts. One
 * definition, because the warm-start server (test/warm-start-server.ts) must start with the same import-time values
 * as the Python processes it stands in for.
 */
import path from "node:path";
import { warmStartSocket } from "./warm-start-server.js";

export function suiteEnv(suiteRoot: string): Record<string, string> {
  const tmp = path.join(suiteRoot, "tmp");
  const cache = path.join(suiteRoot, "cache");
  const socket = warmStartSocket(suiteRoot);
  return {
    TMPDIR: tmp,
    AGENTRL_SUITE_ROOT: suiteRoot,
    AGENTRL_SUITE_TMP: tmp,
    AGENTRL_SUITE_CACHE: cache,
    // Python processes that import transformers make torch's compile cache folder, by default
    // $TMPDIR/torchinductor_<user>: it is a cache shared by the run, so it goes with the other caches.
    TORCHINDUCTOR_CACHE_DIR: path.join(cache, "torchinductor"),
    ...(socket ? { AGENTRL_WARM_START: socket } : {}),
  };
}
