"""Schedules: cron and interval declarations, planning their ticks, firing them in the store,
and the schedule operations the app exposes."""

from __future__ import annotations
