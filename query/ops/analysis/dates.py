"""``datef``: rewrite dates from one Joda-style pattern (or ``unixmillis``) to another."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime, timedelta

from query.ops.base import Op, OpArgs, Row, as_text, cell, column_number

__all__ = ["DateFormatOp", "DatePattern"]

UNIX_MILLIS = "unixmillis"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_TOKEN = re.compile(r"'(?:[^']|'')*'|([A-Za-z])\1*|[^A-Za-z']+")


def _year_text(year: int, width: int) -> str:
    return f"{year % 100:02d}" if width == 2 else f"{year:0{width}d}"


def _formatter(letter: str, width: int) -> Callable[[datetime], str] | None:
    """How one pattern field prints, or None for a letter this port does not know."""
    numeric: dict[str, Callable[[datetime], int]] = {
        "M": lambda t: t.month,
        "d": lambda t: t.day,
        "H": lambda t: t.hour,
        "k": lambda t: t.hour or 24,
        "h": lambda t: t.hour % 12 or 12,
        "m": lambda t: t.minute,
        "s": lambda t: t.second,
        "w": lambda t: t.isocalendar()[1],
        "D": lambda t: t.timetuple().tm_yday,
        "e": lambda t: t.isoweekday(),
    }
    if letter in ("y", "Y"):
        return lambda t: _year_text(t.year, width)
    if letter == "x":
        return lambda t: _year_text(t.isocalendar()[0], width)
    if letter == "M" and width >= 3:
        return lambda t: _MONTHS[t.month - 1] if width == 3 else t.strftime("%B")
    if letter == "E":
        return lambda t: _DAYS[t.weekday()] if width <= 3 else t.strftime("%A")
    if letter == "S":
        return lambda t: f"{t.microsecond // 1000:03d}"[:width].ljust(width, "0")
    if letter == "a":
        return lambda t: "AM" if t.hour < 12 else "PM"
    if letter in numeric:
        field = numeric[letter]
        return lambda t: f"{field(t):0{width}d}"
    return None


class DatePattern:
    """A Joda ``DateTimeFormat`` pattern (``yyMMdd``, ``yyyy-MM-dd HH:mm``, ``yyww``...).

    Knows the fields y, Y, x (ISO week year), M (MMM: month name), d, H, k, h, m,
    s, S, w (ISO week), D (day of year), e, E and a; quoted text and other
    characters stand for themselves. Dates are in UTC.
    """

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.parts: list[tuple[str, int, str]] = []  # (letter or '', width, literal text)
        for match in _TOKEN.finditer(pattern):
            text = match.group(0)
            if match.group(1):
                if _formatter(text[0], len(text)) is None:
                    raise ValueError(f"unknown pattern letter {text[0]!r}")
                self.parts.append((text[0], len(text), ""))
            elif text.startswith("'"):
                self.parts.append(("", 0, text[1:-1].replace("''", "'") or "'"))
            else:
                self.parts.append(("", 0, text))
        self._regex = re.compile(
            "".join(self._regex_part(i, *part) for i, part in enumerate(self.parts))
        )

    @staticmethod
    def _regex_part(place: int, letter: str, width: int, literal: str) -> str:
        """The part's regex; a field's group is named letter, width and place (``y4_0``),
        so a letter may stand twice (the later one wins)."""
        if not letter:
            return re.escape(literal)
        if letter in "MEa" and (width >= 3 or letter != "M"):
            return f"(?P<{letter}{width}_{place}>[A-Za-z]+)"
        digits = f"\\d{{{width}}}" if width >= 2 else "\\d+"
        return f"(?P<{letter}{width}_{place}>[-+]?{digits})"

    def format(self, moment: datetime) -> str:
        """The moment as this pattern prints it."""
        out = []
        for letter, width, literal in self.parts:
            printer = _formatter(letter, width) if letter else None
            out.append(printer(moment) if printer else literal)
        return "".join(out)

    def parse(self, text: str) -> datetime:
        """The moment ``text`` names (missing fields: 1970-01-01 00:00:00 UTC)."""
        match = self._regex.fullmatch(text.strip())
        if match is None:
            raise ValueError(f"{text!r} does not match {self.pattern!r}")
        fields = {name[0]: value for name, value in match.groupdict().items()}
        widths = {name[0]: int(name[1:].partition("_")[0]) for name in match.groupdict()}
        year = self._year(fields.get("y") or fields.get("Y") or fields.get("x"), widths)
        if "M" in fields:
            value = fields["M"]
            month = _MONTHS.index(value[:3].title()) + 1 if not value.isdigit() else int(value)
        else:
            month = 1
        moment = datetime(year, month, int(fields.get("d", 1)), tzinfo=UTC)
        if "w" in fields:
            week_year = self._year(fields.get("x") or fields.get("y"), widths)
            moment = datetime.fromisocalendar(week_year, int(fields["w"]), 1).replace(tzinfo=UTC)
        if "D" in fields:
            moment = datetime(year, 1, 1, tzinfo=UTC) + timedelta(days=int(fields["D"]) - 1)
        hour = int(fields.get("H") or fields.get("k") or fields.get("h") or 0) % 24
        if fields.get("a", "").upper() == "PM" and hour < 12:
            hour += 12
        millis = int((fields.get("S") or "0").ljust(3, "0")[:3])
        return moment.replace(
            hour=hour,
            minute=int(fields.get("m", 0)),
            second=int(fields.get("s", 0)),
            microsecond=millis * 1000,
        )

    @staticmethod
    def _year(text: str | None, widths: dict[str, int]) -> int:
        """A parsed year; a two-digit one is placed as Joda places it."""
        if text is None:
            return 1970
        year = int(text)
        if len(text.lstrip("+-")) != 2:
            return year
        # Joda's two-digit years fall within 50 years before and 49 after the current year.
        lowest = datetime.now(UTC).year - 50
        return lowest + (year - lowest) % 100


def _pattern(args: OpArgs, text: str, index: int) -> DatePattern | None:
    """None for ``unixmillis``; an OpError at ``index`` for a bad pattern."""
    if text.startswith(UNIX_MILLIS):
        return None
    try:
        return DatePattern(text)
    except ValueError as exc:
        raise args.error(index, str(exc), hint="Use Joda letters such as yyyy-MM-dd.") from None


class DateFormatOp(Op):
    """datef=COLS:FROM:TO[:OUT] : rewrite a date from pattern FROM to pattern TO.

    COLS is one column or several (``0,1``) whose texts are joined first. FROM
    and TO are Joda-style patterns (``yyMMdd``, ``yyyy-MM-dd``, ``yyww`` for year
    and ISO week) or ``unixmillis`` (milliseconds since 1970, UTC). The result
    replaces column OUT (default: the first of COLS), or is appended when OUT is
    past the row's end. A cell that does not match FROM is an error.
    Example: ``datef=0:yyMMdd:yyww`` turns ``140108`` into ``1402``;
    ``datef=0:unixmillis:yyMMdd:1`` turns ``1418078000000 0`` into
    ``1418078000000 141208``.
    """

    name = "datef"

    def __init__(self, args: OpArgs) -> None:
        super().__init__(args)
        parts = args.text.split(":")
        if len(parts) < 3 or len(parts) > 4:
            raise args.error(
                0, "expected COLS:FROM:TO[:OUT]", hint="For example datef=0:yyMMdd:yyww."
            )
        starts = [0]
        for part in parts[:-1]:
            starts.append(starts[-1] + len(part) + 1)
        self.columns = [column_number(args, c, starts[0]) for c in parts[0].split(",")]
        self.source = _pattern(args, parts[1], starts[1])
        self.target = _pattern(args, parts[2], starts[2])
        self.out = column_number(args, parts[3], starts[3]) if len(parts) == 4 else self.columns[0]

    def run(self, rows: Iterable[Row]) -> Iterator[Row]:
        """Each row with its date rewritten."""
        for row in rows:
            text = "".join(as_text(cell(row, c)) for c in self.columns)
            try:
                if self.source is None:
                    moment = _EPOCH + timedelta(milliseconds=int(text))
                else:
                    moment = self.source.parse(text)
            except (ValueError, OverflowError) as exc:  # OverflowError: past year 9999
                raise self.args.error(
                    0, f"cannot read the date {text!r} ({exc})", hint="Check FROM's pattern."
                ) from None
            millis = (moment - _EPOCH) // timedelta(milliseconds=1)
            value = millis if self.target is None else self.target.format(moment)
            out = list(row)
            if self.out < len(out):
                out[self.out] = value
            else:
                out.append(value)
            yield out
