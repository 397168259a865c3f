"""png_pixels: the size and pixels of a PNG as gnuplot's pngcairo writes it
(8-bit RGB or RGBA, not interlaced), with the standard library alone: the
plot tests read images with it where no imaging library is installed."""
import struct
import zlib


def size(path):
    """(width, height) from the IHDR chunk."""
    with open(path, "rb") as f:
        head = f.read(24)
    if head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        raise ValueError(f"{path}: not a PNG")
    return struct.unpack(">II", head[16:24])


def rows(path):
    """(width, height, rows): each row a bytes of RGB(A) samples, unfiltered."""
    with open(path, "rb") as f:
        data = f.read()
    pos, idat, w, h, channels = 8, b"", 0, 0, 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or colour not in (2, 6) or interlace:
                raise ValueError(f"{path}: depth {depth}, colour type {colour}, interlace {interlace}")
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw, stride, out, prev = zlib.decompress(idat), w * channels, [], bytearray(w * channels)
    for y in range(h):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b, c = prev[i], prev[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + b) & 255
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        out.append(bytes(line))
        prev = line
    return w, h, channels, out


def inked_at_edges(path, margin=2):
    """Pixels within `margin` of any edge that are not white: text or lines
    running off the image (a clipped legend or title)."""
    w, h, ch, image = rows(path)
    found = []
    for y, line in enumerate(image):
        xs = range(w) if y < margin or y >= h - margin else list(range(margin)) + list(range(w - margin, w))
        for x in xs:
            if min(line[x * ch:x * ch + 3]) < 200:
                found.append((x, y))
    return found
