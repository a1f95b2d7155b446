// graphile-worker's task "noop" (the file name is the task's name): a drain stamp.
import { drainStamp } from "../../stamps.mjs";

export default async () => {
  drainStamp();
};
