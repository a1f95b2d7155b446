// The producer side of the peers protocol (../protocol.py) for the Node peers; prints one JSON line.
//
//   node producer.mjs bullmq|graphile-worker enqueue N       # one warm-up job, then N no-op jobs
//                                                             # one call at a time, timed
//   node producer.mjs bullmq|graphile-worker latency N RATE  # N stamped jobs at a steady RATE/s
//
// The same steps as the Python adapters: the connection is made (and warm) before anything is timed;
// each enqueue is awaited before the next; a latency job carries the moment just before its enqueue
// call (stamps.mjs's clock, the wall clock at microsecond resolution).
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";
import { now } from "./stamps.mjs";

async function bullmq() {
  const { Queue } = await import("bullmq");
  const connection = { host: "127.0.0.1", port: 6379, db: Number(process.env.PEERS_REDIS_DB ?? "13") };
  const queue = new Queue("peers", { connection, prefix: process.env.PEERS_BULLMQ_PREFIX ?? "jobloom-peers-bullmq" });
  await queue.waitUntilReady();
  return {
    warm: () => queue.getWaitingCount(), // a round trip on the connection the enqueues use
    noop: (i) => queue.add("noop", { i }),
    stamped: (enqueued) => queue.add("stamped", { enqueued }),
    close: () => queue.close(),
  };
}

async function graphileWorker() {
  const { makeWorkerUtils } = await import("graphile-worker");
  const utils = await makeWorkerUtils({ connectionString: process.env.PEERS_GRAPHILE_URL });
  return {
    warm: () => utils.withPgClient((client) => client.query("SELECT 1")),
    noop: (i) => utils.addJob("noop", { i }),
    stamped: (enqueued) => utils.addJob("stamped", { enqueued }),
    close: () => utils.release(),
  };
}

async function main() {
  const [system, mode, n, rate] = process.argv.slice(2);
  const systems = { bullmq, "graphile-worker": graphileWorker };
  if (!(system in systems) || !["enqueue", "latency"].includes(mode) || !(Number(n) >= 0)) {
    throw new Error(`usage: producer.mjs bullmq|graphile-worker enqueue N | latency N RATE (got ${process.argv.slice(2)})`);
  }
  const peer = await systems[system]();
  try {
    await peer.warm();
    if (mode === "enqueue") {
      await peer.noop(-1); // the warm-up job: the drain counts N + 1, as for every system
      const t0 = performance.now();
      for (let i = 0; i < Number(n); i++) await peer.noop(i);
      console.log(JSON.stringify({ enqueue_per_s: Number(n) / ((performance.now() - t0) / 1000) }));
    } else {
      const t0 = performance.now();
      for (let k = 0; k < Number(n); k++) {
        const pause = t0 + (1000 * k) / Number(rate) - performance.now();
        if (pause > 0) await sleep(pause);
        await peer.stamped(now());
      }
      console.log(JSON.stringify({ enqueued: Number(n) }));
    }
  } finally {
    await peer.close();
  }
}

await main();
process.exit(0); // nothing left to wait for (a pool may keep the loop alive a while)
