"""The course's time zone: due dates typed and shown in it (nbgrader's ``NbGraderAPI.timezone``).

nbgrader stores every time in UTC (naive datetimes) and shows the formgrader's times in
``c.NbGraderAPI.timezone``; its due-date dialog sends the zone typed beside the date to
``nbgrader.utils.parse_utc``, which reads offsets (``+0700``) but no IANA name
(``Asia/Ho_Chi_Minh`` fails, and an abbreviation it does not know, ``ICT``, is silently taken
as UTC). :func:`parse_due` reads both, and refuses anything else with one sentence;
:func:`shown` writes a UTC time in the course's zone for people.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

DEFAULT_ZONE = "UTC"
_OFFSET = re.compile(r"(?:UTC|GMT)?\s*([+-])(\d{1,2})(?::?(\d\d))?")


def zone(name: str | None) -> tzinfo:
    """The time zone ``name`` names: an IANA name (``Asia/Ho_Chi_Minh``), ``UTC``, or an offset
    (``+0700``, ``+07:00``, ``UTC+7``); ValueError with what to type instead."""
    text = (name or "").strip()
    if not text or text.upper() in ("UTC", "Z", "GMT"):
        return timezone.utc
    match = _OFFSET.fullmatch(text)
    if match:
        sign, hours, minutes = match.groups()
        delta = timedelta(hours=int(hours), minutes=int(minutes or 0))
        if delta > timedelta(hours=14):
            raise ValueError(f"{text!r}: an offset from UTC is at most 14 hours (e.g. +0700)")
        return timezone(-delta if sign == "-" else delta)
    if "/" in text and not text.startswith("/") and ".." not in text:
        try:
            return ZoneInfo(text)
        except (ZoneInfoNotFoundError, ValueError):
            pass
    raise ValueError(f"{text!r} is no time zone: type a name like Asia/Ho_Chi_Minh or Europe/Berlin, "
                     "or an offset from UTC like +0700")


def zone_name(name: str | None) -> str:
    """``name`` as people read it (``UTC`` when none is set); ValueError when it is no zone."""
    zone(name)
    return (name or "").strip() or DEFAULT_ZONE


def parse_due(when: str | None, zone_text: str | None, course_zone: str | None = DEFAULT_ZONE) -> datetime | None:
    """A due date typed as local time (``2026-12-17T17:00``) in ``zone_text`` (the course's zone
    when empty) as nbgrader stores it: naive UTC. None for no due date; ValueError in words."""
    when = (when or "").strip()
    if not when:
        return None
    try:
        local = datetime.fromisoformat(when.replace(" ", "T", 1) if " " in when else when)
    except ValueError:
        raise ValueError(f"{when!r} is no date and time: type it as 2026-12-17T17:00 "
                         "(year-month-day, then hours:minutes)") from None
    if not 2000 <= local.year <= 2100:
        raise ValueError(f"{when!r}: the year {local.year} is no term's (a typo?)")
    if local.tzinfo is None:
        local = local.replace(tzinfo=zone((zone_text or "").strip() or course_zone))
    elif (zone_text or "").strip():
        raise ValueError(f"{when!r} carries its own offset and {zone_text!r} another: give one of them")
    return local.astimezone(timezone.utc).replace(tzinfo=None)


def local(utc: datetime, course_zone: str | None = DEFAULT_ZONE) -> datetime:
    """A naive UTC time (nbgrader's) in the course's zone."""
    return utc.replace(tzinfo=timezone.utc).astimezone(zone(course_zone))


def offset_text(when: datetime) -> str:
    """``UTC+07:00`` for an aware time (``UTC`` at no offset)."""
    offset = when.utcoffset() or timedelta(0)
    if not offset:
        return "UTC"
    minutes = int(offset.total_seconds() // 60)
    sign = "+" if minutes >= 0 else "-"
    return f"UTC{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


def zone_label(there: datetime, course_zone: str | None = DEFAULT_ZONE) -> str:
    """What follows a local time ``there`` of the course's zone: ``(Asia/Ho_Chi_Minh, UTC+07:00)``,
    or ``UTC`` in a course on UTC."""
    name = zone_name(course_zone)
    return "UTC" if name.upper() in ("UTC", "Z", "GMT") else f"({name}, {offset_text(there)})"


def shown(utc: datetime, course_zone: str | None = DEFAULT_ZONE, fmt: str = "%A %d %B %Y, %H:%M") -> str:
    """``Thursday 17 December 2026, 17:00 (Asia/Ho_Chi_Minh, UTC+07:00)``, or ``... 17:00 UTC``
    in a course on UTC."""
    there = local(utc, course_zone)
    return f"{there:{fmt}} {zone_label(there, course_zone)}"


def course_zone(config) -> str:
    """The course's zone from a traitlets config: ``c.NbGraderAPI.timezone`` (nbgrader's own
    setting for the formgrader's times), ``UTC`` when unset; ValueError when it names no zone."""
    section = config.get("NbGraderAPI", None) if hasattr(config, "get") else None
    name = section.get("timezone", None) if section is not None else None
    return zone_name(name if isinstance(name, str) else None)
