/**
 * This process's CPU so far by thread (Linux's /proc): its main thread's, and its other threads' (V8's compiler and
 * collector helpers, libuv's pool) together, in µs.
 */
import { readdirSync, readFileSync } from "node:fs";

/** utime + stime of one of this process's threads, in µs (clock ticks of 10 ms: Linux's CLK_TCK of 100). */
function taskCpuUs(tid) {
  const stat = readFileSync(`/proc/self/task/${tid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) * 10_000;
}

/** The main thread's CPU so far, in µs. */
export function mainThreadCpuUs() {
  return taskCpuUs(process.pid);
}

/** The main thread's CPU and every other thread's together, in µs. */
export function threadCpu() {
  let main = 0;
  let helpers = 0;
  for (const tid of readdirSync("/proc/self/task")) {
    let us;
    try {
      us = taskCpuUs(tid);
    } catch {
      continue; // a thread that ended meanwhile
    }
    if (tid === String(process.pid)) main += us;
    else helpers += us;
  }
  return { main, helpers };
}
