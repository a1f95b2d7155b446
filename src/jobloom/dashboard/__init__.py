"""The web dashboard: server-rendered pages (Jinja2, htmx, uPlot; no CDN) next to the HTTP API.

``site`` (the site: API at ``/v1``, dashboard at ``/``), ``web`` (what the pages share: guard, forms,
templates), ``session`` (login with a token, cookies, CSRF), ``render`` (templates and their filters),
``reads`` (the dashboard's own reads, through active-state indexes), one module per page
(``overview``, ``jobs``, ``job``, ``runs``, ``schedules``, ``limits``, ``workers``, ``login``) and ``dag``
(a run's DAG as SVG).
"""

from __future__ import annotations
