"""Scaffolding: ``jobloom init`` writes a project that works at once, ``jobloom add performer`` grows it.

:mod:`jobloom.scaffold.project` writes a new project from the templates in ``templates/`` (package data);
:mod:`jobloom.scaffold.performer` adds a performer skeleton to a project's jobs module. Both are plain
file work, with no store and no app: the command line (:mod:`jobloom.cli.scaffold`) calls them.
"""

from __future__ import annotations
