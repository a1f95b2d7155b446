// What every Node peer's no-op job does: the same as ../apps/stamps.py, in Node.
//
// One fs.writeSync of one line to a file opened once per process (append mode), in the folder
// PEERS_STAMPS names: drain-<pid> files get one start time per line, latency-<pid> files get
// "enqueued started" pairs, in epoch seconds with 6 decimals. The clock is the wall clock at
// sub-millisecond resolution (Date.now() has whole milliseconds only): performance.timeOrigin, the
// epoch time of the process's start, plus the monotonic time since.
import fs from "node:fs";
import path from "node:path";
import { performance } from "node:perf_hooks";

const files = new Map();

/** Epoch seconds now, microsecond resolution, comparable with Python's time.time(). */
export function now() {
  return (performance.timeOrigin + performance.now()) / 1000;
}

function fd(kind) {
  let f = files.get(kind);
  if (f === undefined) {
    f = fs.openSync(path.join(process.env.PEERS_STAMPS, `${kind}-${process.pid}`), "a", 0o644);
    files.set(kind, f);
  }
  return f;
}

/** Record that a drain job began now. */
export function drainStamp() {
  fs.writeSync(fd("drain"), `${now().toFixed(6)}\n`);
}

/** Record that a latency job enqueued at `enqueued` (epoch seconds) began now. */
export function latencyStamp(enqueued) {
  const started = now();
  fs.writeSync(fd("latency"), `${enqueued.toFixed(6)} ${started.toFixed(6)}\n`);
}
