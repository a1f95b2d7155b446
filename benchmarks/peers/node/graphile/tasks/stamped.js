// graphile-worker's task "stamped": the latency stamp of the moment its payload says it was enqueued.
import { latencyStamp } from "../../stamps.mjs";

export default async (payload) => {
  latencyStamp(payload.enqueued);
};
