"""`python -m scripts.icon [--check]`: the bundle's icon (mcpb/icon.png), drawn with the standard library alone.

A 512×512 PNG (the size Claude Desktop recommends): a rounded square in deep green with a white
"W" stroke and a small gold coin. Every pixel is computed from distances to a few shapes, with
one pixel of analytic anti-aliasing, so the same script always writes the same bytes; `--check`
rebuilds it in memory and exits 1 if the committed file differs.
"""

from __future__ import annotations

import argparse
import itertools
import math
import pathlib
import struct
import sys
import zlib
from collections.abc import Sequence
from typing import Final

ROOT: Final = pathlib.Path(__file__).resolve().parent.parent
ICON: Final = ROOT / "mcpb" / "icon.png"
# The server's own copy (package data): the same drawing at 64 px, for its implementation info in
# `initialize` and for each tool (a 512 px icon would make every `initialize` 15 KB and every
# tools/list 145 KB).
PACKAGE_ICON: Final = ROOT / "mcp_server" / "fairwins" / "ui" / "icon-64.png"
PACKAGE_SIZE: Final = 64
FIX: Final = "make icon   (python -m scripts.icon)"
SIZE: Final = 512

BACKGROUND: Final = (12, 92, 64)
STROKE: Final = (255, 255, 255)
COIN: Final = (242, 183, 5)

CORNER: Final = 96.0  # corner radius of the rounded square
W_POINTS: Final = ((118.0, 170.0), (190.0, 372.0), (256.0, 236.0), (322.0, 372.0), (394.0, 170.0))
W_HALF_WIDTH: Final = 26.0
COIN_CENTRE: Final = (256.0, 118.0)
COIN_RADIUS: Final = 34.0


def _coverage(distance: float) -> float:
    """How much of a pixel a shape covers, from the signed distance of its centre to the edge (negative: inside)."""
    return min(1.0, max(0.0, 0.5 - distance))


def _rounded_square(x: float, y: float) -> float:
    inner = SIZE / 2 - CORNER
    dx = max(abs(x - SIZE / 2) - inner, 0.0)
    dy = max(abs(y - SIZE / 2) - inner, 0.0)
    return math.hypot(dx, dy) - CORNER


def _segment(x: float, y: float, a: tuple[float, float], b: tuple[float, float]) -> float:
    ax, ay = a
    bx, by = b
    vx, vy = bx - ax, by - ay
    t = max(0.0, min(1.0, ((x - ax) * vx + (y - ay) * vy) / (vx * vx + vy * vy)))
    return math.hypot(x - (ax + t * vx), y - (ay + t * vy))


def _w(x: float, y: float) -> float:
    return min(_segment(x, y, a, b) for a, b in itertools.pairwise(W_POINTS)) - W_HALF_WIDTH


def _blend(under: tuple[float, ...], colour: tuple[int, int, int], amount: float) -> tuple[float, ...]:
    return tuple(u + (c - u) * amount for u, c in zip(under, colour, strict=True))


def pixels(size: int = SIZE) -> bytes:
    """Raw RGBA scanlines, each preceded by PNG filter type 0; the drawing scaled to `size` pixels."""
    scale = SIZE / size  # drawing units per pixel: distances are divided by it, so edges stay one pixel soft
    rows = bytearray()
    for py in range(size):
        rows.append(0)
        y = (py + 0.5) * scale
        for px in range(size):
            x = (px + 0.5) * scale
            alpha = _coverage(_rounded_square(x, y) / scale)
            if alpha == 0.0:
                rows += b"\x00\x00\x00\x00"
                continue
            colour: tuple[float, ...] = BACKGROUND
            colour = _blend(colour, STROKE, _coverage(_w(x, y) / scale))
            coin = math.hypot(x - COIN_CENTRE[0], y - COIN_CENTRE[1]) - COIN_RADIUS
            colour = _blend(colour, COIN, _coverage(coin / scale))
            rows += bytes(round(c) for c in colour) + bytes((round(alpha * 255),))
    return bytes(rows)


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png(size: int = SIZE) -> bytes:
    header = struct.pack(">IIBBBBB", size, size, 8, 6, 0, 0, 0)  # 8-bit RGBA, no interlace
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", zlib.compress(pixels(size), 9))
        + _chunk(b"IEND", b"")
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.icon", description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if mcpb/icon.png is not current")
    args = parser.parse_args(argv)
    wanted = {ICON: png(), PACKAGE_ICON: png(PACKAGE_SIZE)}
    stale = [path for path, data in wanted.items() if not path.exists() or path.read_bytes() != data]
    if not stale:
        return 0
    if args.check:
        for path in stale:
            sys.stderr.write(f"{path.relative_to(ROOT)} is not what scripts/icon.py draws; fix it with: {FIX}\n")
        return 1
    for path in stale:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(wanted[path])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
