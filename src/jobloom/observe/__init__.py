"""Operating jobloom: Prometheus metrics (:mod:`.metrics`, :mod:`.gauges`, :mod:`.exposition`),
OpenTelemetry traces (:mod:`.tracing`, ``jobloom[otel]``) and structured logs (:mod:`.logs`).

Each is fed by the engine's one telemetry seam (:mod:`jobloom.engine.telemetry`). Importing this
package imports none of prometheus-client or OpenTelemetry: each module is imported only where its
feature is enabled.
"""

from __future__ import annotations
