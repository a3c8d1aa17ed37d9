"""Writes the shell's PNG icons (192/512, any and maskable) with zlib only: a deep blue field with
a white quaver (eighth note). Run once; the PNGs are committed. Deterministic output."""

import struct
import sys
import zlib
from pathlib import Path


def png(width: int, height: int, pixel) -> bytes:
    rows = bytearray()
    for y in range(height):
        rows.append(0)
        for x in range(width):
            rows.extend(pixel(x, y))
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    header = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)  # RGBA
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(bytes(rows), 9)) + chunk(b"IEND", b"")


def icon(size: int, maskable: bool):
    blue, white, clear = (29, 78, 216, 255), (255, 255, 255, 255), (0, 0, 0, 0)
    scale = size / 100.0
    # maskable icons keep the mark inside the central 80% safe zone and fill the whole square
    content = 0.6 if maskable else 0.8
    radius = 0 if maskable else 18 * scale

    def inside_rounded(x, y):
        if radius == 0:
            return True
        cx = min(max(x, radius), size - radius)
        cy = min(max(y, radius), size - radius)
        return (x - cx) ** 2 + (y - cy) ** 2 <= radius ** 2

    def note(x, y):
        # coordinates in a 100-unit box, centred and scaled to the content area
        u = (x / scale - 50) / content + 50
        v = (y / scale - 50) / content + 50
        head = ((u - 40) / 13) ** 2 + ((v - 70) / 10) ** 2 <= 1
        stem = 50 <= u <= 56 and 22 <= v <= 70
        flag = 56 <= u <= 72 and 22 <= v <= 40 and (v - 22) <= (72 - u) * 1.1
        return head or stem or flag

    def pixel(x, y):
        if not inside_rounded(x + 0.5, y + 0.5):
            return clear
        return white if note(x + 0.5, y + 0.5) else blue
    return png(size, size, pixel)


out = Path(sys.argv[1] if len(sys.argv) > 1 else "Public/icons")
out.mkdir(parents=True, exist_ok=True)
for size in (192, 512):
    (out / f"icon-{size}.png").write_bytes(icon(size, False))
    (out / f"icon-maskable-{size}.png").write_bytes(icon(size, True))
