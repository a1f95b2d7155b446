// The Node.js worker's handler in the SIGTERM test: the reference worker's demo handler, after it
// appends the job's id to a file (JOBLOOM_IT_STARTED), so that the test signals a worker that holds the
// job, not one whose claim's reply is still on its way.
import { appendFileSync } from "node:fs";
import process from "node:process";
import { demoHandler } from "../../examples/remote-worker-node/worker.mjs";

export default async function started(payload, job, signal) {
  appendFileSync(process.env.JOBLOOM_IT_STARTED, `${job.id}\n`);
  return demoHandler(payload, job, signal);
}
