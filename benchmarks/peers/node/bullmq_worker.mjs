// The BullMQ worker as its documentation starts one: new Worker(queue, processor), no options but
// the connection (the local Redis, db PEERS_REDIS_DB) and the key prefix of the bench's own keys.
import { Worker } from "bullmq";
import { drainStamp, latencyStamp } from "./stamps.mjs";

const connection = { host: "127.0.0.1", port: 6379, db: Number(process.env.PEERS_REDIS_DB ?? "13") };
const worker = new Worker(
  "peers",
  async (job) => {
    if (job.name === "stamped") latencyStamp(job.data.enqueued);
    else drainStamp();
  },
  { connection, prefix: process.env.PEERS_BULLMQ_PREFIX ?? "jobloom-peers-bullmq" },
);
const stop = async () => {
  await worker.close();
  process.exit(0);
};
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
