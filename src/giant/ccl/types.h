// Element types and reduction operators of ccl's collectives.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace giant::ccl {

enum class DType : uint8_t { f32, f64, f16, bf16, i32, i64, u8 };
enum class ReduceOp : uint8_t { sum, avg, min, max, prod };
// Where an operation's buffers live: host memory (TCP and shared memory) or
// the memory of the device the process uses (a device backend, such as NCCL).
enum class Memory : uint8_t { host, device };

constexpr DType kAllDTypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16,
                                DType::i32, DType::i64, DType::u8};
constexpr ReduceOp kAllReduceOps[] = {ReduceOp::sum, ReduceOp::avg, ReduceOp::min, ReduceOp::max,
                                      ReduceOp::prod};

size_t dtype_size(DType dtype);
const char* dtype_name(DType dtype);
const char* reduce_op_name(ReduceOp op);
const char* memory_name(Memory memory);
bool is_floating(DType dtype);
DType parse_dtype(const std::string& name);       // throws giant::Error
ReduceOp parse_reduce_op(const std::string& name);  // throws giant::Error

}  // namespace giant::ccl
