#!/usr/bin/python3
"""An independent writer and reader of Megatron's indexed dataset (.bin/.idx),
written from the format's layout with numpy, for Giant's tests.

  megatron_index.py write PREFIX < JSON
      JSON: {"dtype": "uint16", "documents": [[[1, 2], [3]], [[4]]]}: each
      document a list of sequences (Megatron's sentence split), each a list of ids.
  megatron_index.py read PREFIX > JSON
      {"dtype": "uint16", "sequences": [[...], ...], "document_index": [0, ...]},
      after checking the layout (exit 1 with the reason if it is broken).

Layout (little-endian): magic b"MMIDIDX\\x00\\x00", u64 version 1, u8 dtype
code, u64 sequence count S, u64 document index count D, S int32 lengths,
S int64 byte pointers into .bin, D int64 document indices (0 ... S).
"""
import json
import struct
import sys

import numpy as np

MAGIC = b"MMIDIDX\x00\x00"
DTYPES = {1: np.uint8, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.int64, 6: np.float64, 7: np.float32,
          8: np.uint16}
CODES = {np.dtype(t).name: code for code, t in DTYPES.items()}


def write(prefix, spec):
    dtype = np.dtype(spec["dtype"])
    sequences = [np.asarray(s, dtype=np.int64) for doc in spec["documents"] for s in doc]
    for s in sequences:
        if s.size and (s.min() < np.iinfo(dtype).min or s.max() > np.iinfo(dtype).max):
            raise SystemExit("id outside " + dtype.name)
    lengths = np.array([s.size for s in sequences], dtype=np.int32)
    pointers = np.zeros(len(sequences), dtype=np.int64)
    if len(sequences) > 1:
        pointers[1:] = np.cumsum(lengths[:-1].astype(np.int64)) * dtype.itemsize
    document_index = [0]
    for doc in spec["documents"]:
        document_index.append(document_index[-1] + len(doc))
    with open(prefix + ".bin", "wb") as f:
        for s in sequences:
            f.write(s.astype(dtype).tobytes(order="C"))
    with open(prefix + ".idx", "wb") as f:
        f.write(MAGIC)
        f.write(struct.pack("<Q", 1))
        f.write(struct.pack("<B", CODES[dtype.name]))
        f.write(struct.pack("<Q", len(sequences)))
        f.write(struct.pack("<Q", len(document_index)))
        f.write(lengths.astype("<i4").tobytes())
        f.write(pointers.astype("<i8").tobytes())
        f.write(np.array(document_index, dtype="<i8").tobytes())


def fail(why):
    sys.stderr.write("megatron_index.py: " + why + "\n")
    sys.exit(1)


def read(prefix):
    idx = open(prefix + ".idx", "rb").read()
    bin_ = np.fromfile(prefix + ".bin", dtype=np.uint8)
    if idx[:9] != MAGIC:
        fail("bad magic")
    version, code, sequences, documents = struct.unpack_from("<QBQQ", idx, 9)
    if version != 1:
        fail("version %d" % version)
    if code not in DTYPES:
        fail("dtype code %d" % code)
    dtype = np.dtype(DTYPES[code])
    offset = 34
    lengths = np.frombuffer(idx, dtype="<i4", count=sequences, offset=offset)
    offset += 4 * sequences
    pointers = np.frombuffer(idx, dtype="<i8", count=sequences, offset=offset)
    offset += 8 * sequences
    document_index = np.frombuffer(idx, dtype="<i8", count=documents, offset=offset)
    offset += 8 * documents
    if offset != len(idx):
        fail("index is %d bytes, layout says %d" % (len(idx), offset))
    expected = 0
    out = []
    for length, pointer in zip(lengths.tolist(), pointers.tolist()):
        if pointer != expected:
            fail("pointer %d, expected %d" % (pointer, expected))
        end = pointer + length * dtype.itemsize
        out.append(bin_[pointer:end].view(dtype).astype(np.int64).tolist())
        expected = end
    if expected != bin_.size:
        fail(".bin is %d bytes, sequences end at %d" % (bin_.size, expected))
    if documents < 1 or document_index[0] != 0 or document_index[-1] != sequences or \
            np.any(np.diff(document_index) < 0):
        fail("document index %s" % document_index.tolist())
    json.dump({"dtype": dtype.name, "sequences": out, "document_index": document_index.tolist()}, sys.stdout)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("write", "read"):
        sys.exit(__doc__)
    if sys.argv[1] == "write":
        write(sys.argv[2], json.load(sys.stdin))
    else:
        read(sys.argv[2])
