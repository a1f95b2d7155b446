// The Node.js workers' handler in the pull-protocol test: the reference worker's demo handler, counted
// in the test's cross-process gauge around the work (JOBLOOM_IT_GAUGE_URL, a receiver in the test
// process that adds to itapp's gauge). A first attempt with payload.first_seconds (the job of the
// worker that the test kills) is not counted.
import process from "node:process";
import { demoHandler } from "../../examples/remote-worker-node/worker.mjs";

const gauge = (delta) => fetch(`${process.env.JOBLOOM_IT_GAUGE_URL}?d=${delta}`, { method: "POST" });

export default async function counted(payload, job, signal) {
  if (job.attempt === 1 && payload?.first_seconds != null) return demoHandler(payload, job, signal);
  await gauge(1);
  try {
    return await demoHandler(payload, job, signal);
  } finally {
    await gauge(-1);
  }
}
