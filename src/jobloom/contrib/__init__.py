"""Integrations with web frameworks: :mod:`jobloom.contrib.django`, :mod:`jobloom.contrib.fastapi`,
:mod:`jobloom.contrib.flask`.

An outer layer: these modules import jobloom and their framework, and nothing in jobloom imports them,
so ``import jobloom`` never imports a framework. Each is imported only by a project that uses it.
"""

from __future__ import annotations
