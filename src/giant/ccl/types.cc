#include "giant/ccl/types.h"

#include "giant/base/error.h"

namespace giant::ccl {

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::f32: return 4;
    case DType::f64: return 8;
    case DType::f16: return 2;
    case DType::bf16: return 2;
    case DType::i32: return 4;
    case DType::i64: return 8;
    case DType::u8: return 1;
  }
  throw Error("unknown dtype " + std::to_string(static_cast<int>(dtype)));
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
    case DType::u8: return "u8";
  }
  return "unknown";
}

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::avg: return "avg";
    case ReduceOp::min: return "min";
    case ReduceOp::max: return "max";
    case ReduceOp::prod: return "prod";
  }
  return "unknown";
}

const char* memory_name(Memory memory) {
  switch (memory) {
    case Memory::host: return "host";
    case Memory::device: return "device";
  }
  return "unknown";
}

bool is_floating(DType dtype) {
  return dtype == DType::f32 || dtype == DType::f64 || dtype == DType::f16 || dtype == DType::bf16;
}

DType parse_dtype(const std::string& name) {
  for (DType d : kAllDTypes) {
    if (name == dtype_name(d)) return d;
  }
  throw Error("unknown dtype '" + name + "' (use f32, f64, f16, bf16, i32, i64 or u8)");
}

ReduceOp parse_reduce_op(const std::string& name) {
  for (ReduceOp op : kAllReduceOps) {
    if (name == reduce_op_name(op)) return op;
  }
  throw Error("unknown reduce op '" + name + "' (use sum, avg, min, max or prod)");
}

}  // namespace giant::ccl
