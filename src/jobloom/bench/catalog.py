"""Every benchmark workload by the name ``jobloom bench`` knows it by."""

from __future__ import annotations

from jobloom.bench.codec_workloads import codec
from jobloom.bench.flow_workloads import flows
from jobloom.bench.link_workloads import dependencies
from jobloom.bench.middleware_workloads import middleware
from jobloom.bench.workloads import Workload, drain, enqueue, history, latency, limits

WORKLOADS: dict[str, Workload] = {
    "enqueue": enqueue,
    "drain": drain,
    "latency": latency,
    "limits": limits,
    "history": history,
    "flows": flows,
    "dependencies": dependencies,
    "codec": codec,
    "middleware": middleware,
}
