"""Decodes a TensorBoard event file apart from Giant's writer, for the tests.

Run with Debian's /usr/bin/python3 (python3-protobuf): read_event_file.py FILE
checks every TFRecord's framing CRCs (CRC-32C computed bit by bit here), that
the first event is file_version "brain.Event:2" and that every later one is
a summary of simple values re-encoding to exactly its bytes, then prints one
line per scalar: "STEP TAG VALUE". Exits non-zero naming the first fault.
"""
import struct
import sys

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked(crc):
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def event_class():
    """tensorflow/core/util/event.proto's Event, only the fields Giant writes."""
    F = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(name="giant_test_event.proto", package="giant_test")
    summary = file.message_type.add(name="Summary")
    value = summary.nested_type.add(name="Value")
    value.field.add(name="tag", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    value.field.add(name="simple_value", number=2, type=F.TYPE_FLOAT, label=F.LABEL_OPTIONAL)
    summary.field.add(name="value", number=1, type=F.TYPE_MESSAGE, label=F.LABEL_REPEATED,
                      type_name=".giant_test.Summary.Value")
    event = file.message_type.add(name="Event")
    event.field.add(name="wall_time", number=1, type=F.TYPE_DOUBLE, label=F.LABEL_OPTIONAL)
    event.field.add(name="step", number=2, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    event.field.add(name="file_version", number=3, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    event.field.add(name="summary", number=5, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL,
                    type_name=".giant_test.Summary")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    descriptor = pool.FindMessageTypeByName("giant_test.Event")
    if hasattr(message_factory, "GetMessageClass"):
        return message_factory.GetMessageClass(descriptor)
    return message_factory.MessageFactory(pool).GetPrototype(descriptor)


def records(data):
    at = 0
    while at < len(data):
        if len(data) - at < 12:
            raise ValueError(f"record at byte {at}: truncated header")
        header = data[at:at + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", data[at + 8:at + 12])
        if masked(crc32c(header)) != length_crc:
            raise ValueError(f"record at byte {at}: length CRC mismatch")
        body = data[at + 12:at + 12 + length]
        if len(body) != length or len(data) < at + 16 + length:
            raise ValueError(f"record at byte {at}: truncated data")
        (body_crc,) = struct.unpack("<I", data[at + 12 + length:at + 16 + length])
        if masked(crc32c(body)) != body_crc:
            raise ValueError(f"record at byte {at}: data CRC mismatch")
        yield body
        at += 16 + length


def main(path):
    assert crc32c(b"123456789") == 0xE3069283
    Event = event_class()
    with open(path, "rb") as f:
        data = f.read()
    for index, body in enumerate(records(data)):
        event = Event()
        event.ParseFromString(body)
        if event.SerializeToString() != body:
            raise ValueError(f"event {index}: does not re-encode to its bytes (unknown or misordered fields)")
        if not event.wall_time > 1e9:
            raise ValueError(f"event {index}: wall_time {event.wall_time} is not a Unix time")
        if index == 0:
            if event.file_version != "brain.Event:2" or event.HasField("summary"):
                raise ValueError(f"first event is not file_version brain.Event:2: {event}")
            continue
        if not event.HasField("summary") or not event.summary.value or event.HasField("file_version"):
            raise ValueError(f"event {index}: not a summary of values: {event}")
        for value in event.summary.value:
            if not value.HasField("simple_value"):
                raise ValueError(f"event {index}: {value.tag} has no simple_value")
            print(event.step, value.tag, repr(value.simple_value))
    if not data:
        raise ValueError("empty file")


if __name__ == "__main__":
    try:
        main(sys.argv[1])
    except Exception as e:  # the test shows the reason
        print(f"read_event_file.py: {sys.argv[1]}: {e}", file=sys.stderr)
        sys.exit(1)
