"""A tiny RGB raster with lines, boxes and a 3x5 pixel font, written as PNG with zlib only
(matplotlib is not a dependency). Enough for the demo's loss curve and protocol timeline."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

Color = tuple[int, int, int]

# 3x5 glyphs, rows top to bottom, 3 bits each (MSB = left column).
_FONT = {
    "0": (7, 5, 5, 5, 7),
    "1": (2, 6, 2, 2, 7),
    "2": (7, 1, 7, 4, 7),
    "3": (7, 1, 7, 1, 7),
    "4": (5, 5, 7, 1, 1),
    "5": (7, 4, 7, 1, 7),
    "6": (7, 4, 7, 5, 7),
    "7": (7, 1, 1, 1, 1),
    "8": (7, 5, 7, 5, 7),
    "9": (7, 5, 7, 1, 7),
    ".": (0, 0, 0, 0, 2),
    "-": (0, 0, 7, 0, 0),
    ":": (0, 2, 0, 2, 0),
    ",": (0, 0, 0, 2, 4),
    " ": (0, 0, 0, 0, 0),
    "%": (5, 1, 2, 4, 5),
    "/": (1, 1, 2, 4, 4),
    "A": (2, 5, 7, 5, 5),
    "B": (6, 5, 6, 5, 6),
    "C": (7, 4, 4, 4, 7),
    "D": (6, 5, 5, 5, 6),
    "E": (7, 4, 6, 4, 7),
    "F": (7, 4, 6, 4, 4),
    "G": (7, 4, 5, 5, 7),
    "H": (5, 5, 7, 5, 5),
    "I": (7, 2, 2, 2, 7),
    "J": (1, 1, 1, 5, 7),
    "K": (5, 5, 6, 5, 5),
    "L": (4, 4, 4, 4, 7),
    "M": (5, 7, 7, 5, 5),
    "N": (6, 5, 5, 5, 5),
    "O": (7, 5, 5, 5, 7),
    "P": (7, 5, 7, 4, 4),
    "Q": (7, 5, 5, 7, 1),
    "R": (7, 5, 6, 5, 5),
    "S": (7, 4, 7, 1, 7),
    "T": (7, 2, 2, 2, 2),
    "U": (5, 5, 5, 5, 7),
    "V": (5, 5, 5, 5, 2),
    "W": (5, 5, 7, 7, 5),
    "X": (5, 5, 2, 5, 5),
    "Y": (5, 5, 2, 2, 2),
    "Z": (7, 1, 2, 4, 7),
    "(": (1, 2, 2, 2, 1),
    ")": (4, 2, 2, 2, 4),
}


class Canvas:
    def __init__(self, width: int, height: int, bg: Color = (255, 255, 255)) -> None:
        self.w, self.h = width, height
        self.px = bytearray(bytes(bg) * (width * height))

    def set(self, x: int, y: int, c: Color) -> None:
        if 0 <= x < self.w and 0 <= y < self.h:
            i = 3 * (y * self.w + x)
            self.px[i : i + 3] = bytes(c)

    def box(self, x0: int, y0: int, x1: int, y1: int, c: Color) -> None:
        for y in range(max(0, min(y0, y1)), min(self.h, max(y0, y1) + 1)):
            for x in range(max(0, min(x0, x1)), min(self.w, max(x0, x1) + 1)):
                self.set(x, y, c)

    def line(self, x0: int, y0: int, x1: int, y1: int, c: Color, width: int = 1) -> None:
        n = max(abs(x1 - x0), abs(y1 - y0), 1)
        for i in range(n + 1):
            x = round(x0 + (x1 - x0) * i / n)
            y = round(y0 + (y1 - y0) * i / n)
            self.box(x - width // 2, y - width // 2, x + (width - 1) // 2, y + (width - 1) // 2, c)

    def text(self, x: int, y: int, s: str, c: Color = (0, 0, 0), scale: int = 2) -> None:
        for ch in s.upper():
            rows = _FONT.get(ch, _FONT[" "])
            for r, bits in enumerate(rows):
                for col in range(3):
                    if bits & (4 >> col):
                        self.box(
                            x + col * scale,
                            y + r * scale,
                            x + col * scale + scale - 1,
                            y + r * scale + scale - 1,
                            c,
                        )
            x += 4 * scale

    def save(self, path: Path) -> None:
        raw = b"".join(
            b"\x00" + bytes(self.px[3 * y * self.w : 3 * (y + 1) * self.w]) for y in range(self.h)
        )

        def chunk(tag: bytes, data: bytes) -> bytes:
            body = tag + data
            return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

        ihdr = struct.pack(">IIBBBBB", self.w, self.h, 8, 2, 0, 0, 0)
        png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw, 9))
        Path(path).write_bytes(png + chunk(b"IEND", b""))


PALETTE: list[Color] = [
    (31, 119, 180),
    (255, 127, 14),
    (44, 160, 44),
    (214, 39, 40),
    (148, 103, 189),
    (140, 86, 75),
    (227, 119, 194),
    (127, 127, 127),
]


def demo_plot(
    path: Path,
    losses: list[tuple[int, float]],
    phases: list[tuple[str, float, float]],
    total_s: float,
) -> None:
    """Top: training loss per checkpoint step. Bottom: one bar per protocol phase (seconds)."""
    cv = Canvas(800, 560)
    # -- loss curve
    x0, y0, x1, y1 = 70, 40, 770, 260
    cv.text(x0, 12, "TRAINING LOSS (BATCH LOSS AT EACH CHECKPOINT STEP)")
    cv.line(x0, y1, x1, y1, (0, 0, 0))
    cv.line(x0, y0, x0, y1, (0, 0, 0))
    if losses:
        tmax = max(t for t, _ in losses) or 1
        lmax = max(v for _, v in losses) or 1.0
        cv.text(8, y0, f"{lmax:.2f}")
        cv.text(8, y1 - 10, "0")
        cv.text(x1 - 30, y1 + 8, str(tmax))
        pts = [
            (x0 + round((x1 - x0) * t / tmax), y1 - round((y1 - y0) * v / lmax)) for t, v in losses
        ]
        for a, b in zip(pts, pts[1:], strict=False):
            cv.line(*a, *b, PALETTE[0], width=3)
        for x, y in pts:
            cv.box(x - 3, y - 3, x + 3, y + 3, PALETTE[3])
    # -- timeline
    top = 320
    cv.text(x0, top - 24, f"PROTOCOL TIMELINE (SECONDS, TOTAL {total_s:.0f})")
    span = max(total_s, 1e-9)
    row = 0
    for i, (name, start, end) in enumerate(phases):
        y = top + row * 22
        row += 1
        xa = x0 + round((x1 - x0) * start / span)
        xb = max(xa + 2, x0 + round((x1 - x0) * end / span))
        cv.box(xa, y, xb, y + 14, PALETTE[i % len(PALETTE)])
        cv.text(8, y + 2, name[:7], scale=2)
    cv.line(x0, top - 4, x0, top + row * 22, (0, 0, 0))
    cv.save(path)
