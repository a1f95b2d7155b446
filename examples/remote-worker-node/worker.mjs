// A jobloom remote worker in Node.js (18 or newer): built-in fetch, no packages.
//
// It claims jobs of remote bindings over jobloom's worker protocol, runs each with a handler,
// renews the leases of the jobs it runs, and reports how each attempt ended:
//
//   POST /v1/worker/claim     {worker, bindings, max, wait}         -> {jobs: [{id, attempt, binding, payload,
//                                                                         deadline, lease_expires_at, claim}]}
//   POST /v1/worker/heartbeat {worker, jobs: [{id, attempt, claim}]} -> {jobs: [{id, attempt}]}  (still held)
//   POST /v1/worker/complete  {worker, id, attempt, claim, outcome, result?, error?, retry_after?}
//                                                                    -> 200 applied, 409 stale, 403 wrong claim
//
// `claim` is the attempt's secret: the server keeps only its hash, and a heartbeat or report without
// it is refused, so nobody who merely knows this worker's name can renew or complete its jobs. Keep it
// in memory only. A lease is never renewed past the job's deadline: the heartbeat's answer leaves the
// job out then, and the server ends the attempt as timed out.
//
// Configuration (environment):
//   JOBLOOM_URL          the server, e.g. http://127.0.0.1:8080 (required)
//   JOBLOOM_TOKEN        a token with the "worker" scope (sent as Authorization: Bearer ...); one made with
//                        `--bindings` serves only those bindings
//   JOBLOOM_BINDINGS     comma-separated remote bindings to serve (required)
//   JOBLOOM_WORKER       this worker's name (default: <host>:<pid>)
//   JOBLOOM_CONCURRENCY  jobs run at once (default 4)
//   JOBLOOM_WAIT         seconds a claim waits for work (long poll, default 20)
//   JOBLOOM_HANDLER      a module whose default export is `async (payload, job, signal) => result`
//                        (default: the demo handler below)
//
// A handler returns the result (any JSON value), or throws: `Retry` (another attempt, after
// `seconds` or the binding's backoff), `Permanent` (fail now), anything else (a failed attempt,
// retried under the binding's policy). `signal` aborts when the job's lease is lost, it is
// cancelled, its deadline passes, or the worker stops: stop then. On SIGTERM or SIGINT the worker
// says what it does, stops claiming (a claim waiting for work is aborted: an idle worker exits at
// once) and waits up to JOBLOOM_GRACE seconds (default 25) for running jobs; the same signal again
// stops it now. Jobs still running then are aborted and reported failed (retried under their
// binding's policy; an at-most-once job fails).

import os from "node:os";
import process from "node:process";
import { pathToFileURL } from "node:url";

export class Retry extends Error {
  constructor(seconds = null, message = "retry requested") {
    super(message);
    this.seconds = seconds;
  }
}

export class Permanent extends Error {}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
// a wait raced against something else: its timer alone never keeps the process alive
const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms).unref());

// The demo handler: waits payload.seconds (default 0.1; payload.first_seconds on a first attempt, if
// given), then returns what it did; payload.fail fails the attempt with that message.
export async function demoHandler(payload, job, signal) {
  const first = job.attempt === 1 && payload?.first_seconds != null;
  const seconds = Number(first ? payload.first_seconds : payload?.seconds ?? 0.1);
  await new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, seconds * 1000);
    signal.addEventListener("abort", () => { clearTimeout(timer); reject(signal.reason); }, { once: true });
  });
  if (payload?.fail) throw new Error(String(payload.fail));
  return { job: job.id, attempt: job.attempt, worker: job.worker, pid: process.pid };
}

export class Worker {
  constructor({ url, token, bindings, name, concurrency = 4, wait = 20, grace = 25, handler = demoHandler,
                log = console }) {
    if (!url) throw new Error("JOBLOOM_URL is required");
    if (!bindings?.length) throw new Error("JOBLOOM_BINDINGS is required");
    this.url = url.replace(/\/+$/, "");
    this.token = token;
    this.bindings = bindings;
    this.name = name || `${os.hostname()}:${process.pid}`;
    this.concurrency = concurrency;
    this.wait = wait;
    this.grace = grace;
    this.handler = handler;
    this.log = log;
    this.running = new Map(); // "id:attempt" -> {job, controller, leaseMs}
    this.stopping = false;
    this.signals = new Set(); // the stop signals received
    this.claiming = null; // the AbortController of the claim under way
    this.wakeStopped = null;
    this.until = null; // when the grace period ends (0: stop now)
    this.stopped = new Promise((resolve) => { this.wakeStopped = resolve; });
    this.idle = null; // resolves when a running job ends
  }

  async post(path, body, { attempts = 5, signal } = {}) {
    // Network errors and 5xx are retried with backoff (every call of the protocol is idempotent).
    let delay = 200;
    for (let i = 1; ; i++) {
      try {
        const response = await fetch(this.url + path, {
          method: "POST",
          signal,
          headers: { "Content-Type": "application/json",
                     ...(this.token ? { Authorization: `Bearer ${this.token}` } : {}) },
          body: JSON.stringify(body),
        });
        if (response.status >= 500 && i < attempts) throw new Error(`HTTP ${response.status}`);
        const text = await response.text();
        return { status: response.status, body: text ? JSON.parse(text) : null };
      } catch (err) {
        if (i >= attempts || signal?.aborted) throw err;
        this.log.warn(`jobloom: POST ${path} failed (${err.message}); retrying in ${delay} ms`);
        await sleep(delay);
        delay = Math.min(delay * 2, 5000);
      }
    }
  }

  async run() {
    const stop = (sig) => this.onSignal(sig);
    process.on("SIGTERM", stop);
    process.on("SIGINT", stop);
    const beats = this.heartbeats();
    try {
      while (!this.stopping) {
        const free = this.concurrency - this.running.size;
        if (free <= 0) {
          await this.untilOneEnds();
          continue;
        }
        let reply;
        this.claiming = new AbortController();
        try {
          // a stop aborts the claim: the server then ends its long poll and claims nothing for it
          reply = await this.post("/v1/worker/claim",
            { worker: this.name, bindings: this.bindings, max: free, wait: this.wait },
            { signal: this.claiming.signal });
        } catch (err) {
          if (this.stopping) break;
          this.log.error(`jobloom: claim failed: ${err.message}`);
          await Promise.race([pause(1000), this.stopped]);
          continue;
        } finally {
          this.claiming = null;
        }
        if (reply.status !== 200) {
          this.log.error(`jobloom: claim refused: HTTP ${reply.status} ${JSON.stringify(reply.body)}`);
          await Promise.race([pause(1000), this.stopped]);
          continue;
        }
        for (const job of reply.body.jobs) this.start(job);
      }
      if (this.until !== 0) this.until = Date.now() + this.grace * 1000;
      while (this.running.size && Date.now() < this.until) {
        await Promise.race([this.untilOneEnds(), pause(this.until - Date.now())]);
      }
      const left = [...this.running.values()];
      if (left.length) {
        this.log.warn(`jobloom: interrupting ${left.length} running job(s): each is reported failed`);
      }
      for (const entry of left) entry.controller.abort(new Error("worker stopping"));
      while (this.running.size) await this.untilOneEnds(); // their reports
    } finally {
      this.beating = false;
      this.quitBeats?.();
      await beats;
      process.off("SIGTERM", stop);
      process.off("SIGINT", stop);
    }
    this.log.info?.(`jobloom: worker ${this.name} stopped`);
  }

  // SIGTERM or SIGINT: the first stops gracefully and says so; the same signal again stops now.
  onSignal(sig) {
    const again = sig === "SIGINT" ? "press Ctrl-C again" : "send SIGTERM again";
    if (this.signals.has(sig)) {
      if (this.until === 0) return;
      this.log.warn(`jobloom: ${sig} again: stopping now`);
      this.until = 0;
      this.ended(); // the grace loop looks again, and interrupts what runs
      return;
    }
    const first = this.signals.size === 0;
    this.signals.add(sig);
    if (!first) return;
    const n = this.running.size;
    this.log.warn(n
      ? `jobloom: ${sig}: finishing ${n} running job(s), up to ${this.grace} s; ${again} to stop now`
      : `jobloom: ${sig}: no running jobs; stopping`);
    this.stop();
  }

  stop() {
    this.stopping = true;
    this.wakeStopped();
    this.claiming?.abort(new Error("worker stopping"));
    this.ended();
  }

  untilOneEnds() {
    if (!this.idle) {
      let resolve;
      this.idle = new Promise((r) => { resolve = r; });
      this.idle.resolve = resolve;
    }
    return this.idle;
  }

  ended() {
    if (this.idle) {
      this.idle.resolve();
      this.idle = null;
    }
  }

  start(job) {
    const key = `${job.id}:${job.attempt}`;
    const controller = new AbortController();
    // the lease's length, as well as this host's clock can tell it (at least 300 ms)
    const leaseMs = Math.max(300, job.lease_expires_at * 1000 - Date.now());
    this.running.set(key, { job, controller, leaseMs });
    let timer = null;
    if (job.deadline != null) {
      const left = Math.max(0, job.deadline * 1000 - Date.now());
      timer = setTimeout(() => controller.abort(new Error("timed out: the job's deadline passed")), left);
    }
    const { claim, ...visible } = job; // the claim secret stays with the worker, not the handler
    this.perform({ ...visible, worker: this.name }, controller.signal)
      .then((report) => this.complete(job, report))
      .catch((err) => this.log.error(`jobloom: job ${key} could not be reported: ${err.message}`))
      .finally(() => {
        clearTimeout(timer);
        this.running.delete(key);
        this.ended();
      });
  }

  async perform(job, signal) {
    try {
      const result = await this.handler(job.payload, job, signal);
      if (signal.aborted) return { outcome: "failed", error: String(signal.reason?.message ?? signal.reason) };
      return { outcome: "succeeded", result: result === undefined ? null : result };
    } catch (err) {
      if (err instanceof Retry) {
        return { outcome: "retry", error: err.message, ...(err.seconds != null ? { retry_after: err.seconds } : {}) };
      }
      if (err instanceof Permanent) return { outcome: "permanent", error: err.message };
      return { outcome: "failed", error: `${err?.name ?? "Error"}: ${err?.message ?? String(err)}` };
    }
  }

  async complete(job, report) {
    const reply = await this.post("/v1/worker/complete",
      { worker: this.name, id: job.id, attempt: job.attempt, claim: job.claim, ...report });
    if (reply.status === 409) {
      this.log.warn(`jobloom: job ${job.id} attempt ${job.attempt}: report not applied (the attempt no longer holds the job)`);
    } else if (reply.status !== 200) {
      this.log.error(`jobloom: job ${job.id}: report refused: HTTP ${reply.status} ${JSON.stringify(reply.body)}`);
    }
  }

  // Renew the leases of every running job, three times per lease; a job the server no longer counts
  // as ours (its lease was lost, or it was cancelled) is aborted.
  async heartbeats() {
    this.beating = true;
    const quit = new Promise((resolve) => { this.quitBeats = resolve; });
    while (this.beating) {
      const entries = [...this.running.values()];
      const lease = entries.length ? Math.min(...entries.map((e) => e.leaseMs)) : 3000;
      await Promise.race([pause(Math.max(100, Math.min(10000, lease / 3))), quit]);
      const jobs = [...this.running.values()].map((e) => ({ id: e.job.id, attempt: e.job.attempt, claim: e.job.claim }));
      if (!jobs.length || !this.beating) continue;
      let reply;
      try {
        reply = await this.post("/v1/worker/heartbeat", { worker: this.name, jobs }, { attempts: 1 });
      } catch (err) {
        this.log.warn(`jobloom: heartbeat failed: ${err.message}`);
        continue;
      }
      if (reply.status !== 200) {
        this.log.warn(`jobloom: heartbeat refused: HTTP ${reply.status}`);
        continue;
      }
      const held = new Set(reply.body.jobs.map((j) => `${j.id}:${j.attempt}`));
      for (const { id, attempt } of jobs) {
        const entry = this.running.get(`${id}:${attempt}`);
        if (entry && !held.has(`${id}:${attempt}`)) entry.controller.abort(new Error("lease lost or cancelled"));
      }
    }
  }
}

async function main() {
  const env = process.env;
  const handler = env.JOBLOOM_HANDLER
    ? (await import(pathToFileURL(env.JOBLOOM_HANDLER).href)).default
    : demoHandler;
  const worker = new Worker({
    url: env.JOBLOOM_URL,
    token: env.JOBLOOM_TOKEN,
    bindings: (env.JOBLOOM_BINDINGS || "").split(",").map((s) => s.trim()).filter(Boolean),
    name: env.JOBLOOM_WORKER,
    concurrency: Number(env.JOBLOOM_CONCURRENCY || 4),
    wait: Number(env.JOBLOOM_WAIT || 20),
    grace: Number(env.JOBLOOM_GRACE || 25),
    handler,
  });
  worker.log.info?.(`jobloom worker ${worker.name} serving ${worker.bindings.join(", ")} from ${worker.url}`);
  await worker.run();
  // nothing is left to do once run() returns: exit now rather than when idle sockets and timers expire
  process.exit(0);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  main().catch((err) => {
    console.error(`jobloom worker: ${err.message}`);
    process.exit(1);
  });
}
