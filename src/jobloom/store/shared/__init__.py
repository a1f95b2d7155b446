"""The named SQL both dialects run (``sql/queries*.sql``; :mod:`jobloom.store.sql` reads it)."""
