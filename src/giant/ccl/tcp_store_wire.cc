#include "giant/ccl/tcp_store_wire.h"

namespace giant::ccl::store_wire {

Request parse_request(const Bytes& payload, size_t max_key_bytes, size_t max_value_bytes) {
  Reader reader(payload);
  Request request;
  request.op = static_cast<Op>(reader.u8());
  switch (request.op) {
    case Op::set:
      request.key = reader.str(max_key_bytes);
      if (reader.left() > max_value_bytes) throw ProtocolError("value over the limit");
      request.value = reader.rest();
      return request;
    case Op::get:
      request.timeout_ms = reader.i64();
      request.key = reader.str(max_key_bytes);
      reader.expect_end();
      return request;
    case Op::add:
      request.delta = reader.i64();
      request.key = reader.str(max_key_bytes);
      reader.expect_end();
      return request;
    case Op::wait: {
      request.timeout_ms = reader.i64();
      const uint32_t count = reader.u32();
      // Each key takes at least its 4-byte length, so count is bounded by the frame.
      if (count > reader.left() / 4) throw ProtocolError("wait lists more keys than the message holds");
      for (uint32_t i = 0; i < count; ++i) request.keys.push_back(reader.str(max_key_bytes));
      reader.expect_end();
      return request;
    }
  }
  throw ProtocolError("unknown request " + std::to_string(static_cast<int>(request.op)));
}

Reply parse_reply(Op op, const Bytes& payload, size_t max_key_bytes, size_t max_value_bytes) {
  Reader reader(payload);
  Reply reply;
  reply.status = static_cast<Status>(reader.u8());
  auto unexpected = [&] {
    return ProtocolError("status " + std::to_string(static_cast<int>(reply.status)) + " in a reply of " +
                         std::to_string(payload.size()) + " bytes");
  };
  switch (op) {
    case Op::set:
      if (reply.status != Status::ok) throw unexpected();
      break;
    case Op::get:
      if (reply.status == Status::ok) {
        reply.value = reader.rest();
      } else if (reply.status != Status::timeout) {
        throw unexpected();
      }
      break;
    case Op::add:
      if (reply.status == Status::ok) {
        reply.number = reader.i64();
      } else if (reply.status == Status::error) {
        reply.message = reader.str(max_value_bytes);
      } else {
        throw unexpected();
      }
      break;
    case Op::wait:
      if (reply.status == Status::timeout) {
        const uint32_t count = reader.u32();
        if (count > reader.left() / 4) throw ProtocolError("a timeout lists more keys than the reply holds");
        for (uint32_t i = 0; i < count; ++i) reply.missing.push_back(reader.str(max_key_bytes));
      } else if (reply.status != Status::ok) {
        throw unexpected();
      }
      break;
    default:
      throw ProtocolError("a reply to an unknown request");
  }
  reader.expect_end();
  return reply;
}

}  // namespace giant::ccl::store_wire
