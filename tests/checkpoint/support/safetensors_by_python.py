#!/usr/bin/python3
"""Safetensors apart from Giant's code: Python's struct and json, nothing else.

  write PATH  writes a file of known tensors of every dtype, its header's keys
              in another order than its data, not padded (valid, though
              writers usually pad), with two metadata strings.
  read PATH   checks a file's framing as the format states it (8-byte
              little-endian length, a JSON object starting with '{' padded
              with spaces, offsets that tile the data exactly, END - BEGIN =
              elements x element size, no duplicate names) and prints
              "data_offset N", "meta KEY VALUE" lines, then per tensor in
              data order "tensor NAME DTYPE [SHAPE] VALUES..." (floats as
              Python's repr). Any violation exits 1 naming it.
"""
import json
import struct
import sys

# dtype: (struct code, bytes per element)
FORMATS = {
    "F64": ("d", 8), "F32": ("f", 4), "F16": ("e", 2), "BF16": ("H", 2),
    "I64": ("q", 8), "I32": ("i", 4), "I16": ("h", 2), "I8": ("b", 1),
    "U8": ("B", 1), "BOOL": ("?", 1),
}


def fail(message):
    print("invalid: " + message)
    sys.exit(1)


def elements(shape):
    count = 1
    for d in shape:
        count *= d
    return count


def encode(dtype, values):
    code, _ = FORMATS[dtype]
    return struct.pack("<%d%s" % (len(values), code), *values)


def decode(dtype, data):
    code, size = FORMATS[dtype]
    values = struct.unpack("<%d%s" % (len(data) // size, code), data)
    if dtype == "BF16":  # the upper half of a float32
        values = [struct.unpack("<f", struct.pack("<I", v << 16))[0] for v in values]
    return values


def value_text(dtype, value):
    if dtype == "BOOL":
        return "1" if value else "0"
    if dtype in ("F64", "F32", "F16", "BF16"):
        return repr(float(value))
    return str(value)


def write(path):
    # (name, dtype, shape, values), in data order
    tensors = [
        ("weights/w", "F32", [2, 3], [-1.5, 0.25, 3.0, 1024.0, -0.0, 65504.0]),
        ("ids", "I64", [3], [-(2 ** 40), 0, 2 ** 62 + 1]),
        ("half", "F16", [2], [1.0, -2.5]),
        ("brain", "BF16", [3], [0x3F80, 0xC020, 0x7F80]),  # 1, -2.5, inf as raw bits
        ("mask", "BOOL", [2, 2], [True, False, False, True]),
        ("bytes", "U8", [5], [0, 1, 127, 128, 255]),
        ("small", "I8", [2], [-128, 127]),
        ("shorts", "I16", [2], [-32768, 32767]),
        ("ints", "I32", [2], [-(2 ** 31), 2 ** 31 - 1]),
        ("scalar", "F64", [], [3.141592653589793]),
        ("empty", "F32", [0, 4], []),
    ]
    data = b""
    entries = {}
    for name, dtype, shape, values in tensors:
        blob = encode(dtype, values)
        entries[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(blob)]}
        data += blob
    header = {"__metadata__": {"format": "pt", "written_by": "python"}}
    for name in sorted(entries, reverse=True):  # not the data's order
        header[name] = entries[name]
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


def no_duplicates(pairs):
    names = [name for name, _ in pairs]
    if len(names) != len(set(names)):
        fail("duplicate names in the header")
    return dict(pairs)


def read(path):
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        fail("shorter than the 8-byte header length")
    (length,) = struct.unpack("<Q", blob[:8])
    if 8 + length > len(blob):
        fail("header length %d beyond the file's %d bytes" % (length, len(blob)))
    text = blob[8:8 + length].decode("utf-8")
    if not text.startswith("{"):
        fail("header does not start with '{'")
    stripped = text.rstrip(" ")
    if not stripped.endswith("}"):
        fail("header not a JSON object followed by spaces only")
    header = json.loads(stripped, object_pairs_hook=no_duplicates)
    data = blob[8 + length:]
    metadata = header.pop("__metadata__", {})
    print("data_offset %d" % (8 + length))
    for key in sorted(metadata):
        if not isinstance(metadata[key], str):
            fail("metadata %s is not a string" % key)
        print("meta %s %s" % (key, metadata[key]))
    position = 0
    lines = []
    for name, entry in sorted(header.items(), key=lambda item: tuple(item[1]["data_offsets"])):
        begin, end = entry["data_offsets"]
        dtype, shape = entry["dtype"], entry["shape"]
        if dtype not in FORMATS:
            fail("%s: dtype %s" % (name, dtype))
        if begin != position:
            fail("%s: begins at %d, the previous tensor ended at %d" % (name, begin, position))
        if end - begin != elements(shape) * FORMATS[dtype][1]:
            fail("%s: %d bytes for shape %s" % (name, end - begin, shape))
        position = end
        values = decode(dtype, data[begin:end])
        shape_text = "[" + ",".join(str(d) for d in shape) + "]"
        lines.append(" ".join(["tensor", name, dtype, shape_text] + [value_text(dtype, v) for v in values]))
    if position != len(data):
        fail("tensors end at %d, the data section has %d bytes" % (position, len(data)))
    for line in lines:
        print(line)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("write", "read"):
        fail("usage: safetensors_by_python.py write|read PATH")
    (write if sys.argv[1] == "write" else read)(sys.argv[2])
