#include "giant/parallel/tensor_collectives.h"

#include <string>

#include <torch/torch.h>

#include "giant/base/error.h"
#include "giant/base/timer.h"
#include "giant/ccl/backend.h"
#include "giant/ccl/collectives.h"

namespace giant::parallel {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Memory the collective can use: the tensor itself when ccl reaches it and
// it is contiguous, a contiguous copy when only that is missing, else a copy
// staged in host memory.
at::Tensor reachable_view(const at::Tensor& t) {
  if (ccl_reaches(t)) return t.is_contiguous() ? t : t.contiguous();
  return t.to(at::kCPU).contiguous();
}

// The communicator and the clock ride in the context as integers: autograd
// saves only IValues, and both outlive the graph.
void save_comm(AutogradContext* ctx, ccl::Communicator* comm, double* clock) {
  ctx->saved_data["comm"] = static_cast<int64_t>(reinterpret_cast<intptr_t>(comm));
  ctx->saved_data["clock"] = static_cast<int64_t>(reinterpret_cast<intptr_t>(clock));
}
ccl::Communicator& saved_comm(AutogradContext* ctx) {
  return *reinterpret_cast<ccl::Communicator*>(static_cast<intptr_t>(ctx->saved_data["comm"].toInt()));
}
double* saved_clock(AutogradContext* ctx) {
  return reinterpret_cast<double*>(static_cast<intptr_t>(ctx->saved_data["clock"].toInt()));
}

// Adds the lifetime of the scope to *clock, when there is one.
class ClockScope {
 public:
  explicit ClockScope(double* clock) : clock_(clock) {}
  ~ClockScope() {
    if (clock_) *clock_ += watch_.seconds();
  }

 private:
  double* clock_;
  Stopwatch watch_;
};

struct CopyToRegion : torch::autograd::Function<CopyToRegion> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, ccl::Communicator* comm, double* clock) {
    save_comm(ctx, comm, clock);
    return x.view_as(x);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    ClockScope timed(saved_clock(ctx));
    return {allreduce(grads[0], saved_comm(ctx)), at::Tensor(), at::Tensor()};
  }
};

struct ReduceFromRegion : torch::autograd::Function<ReduceFromRegion> {
  static at::Tensor forward(AutogradContext*, const at::Tensor& x, ccl::Communicator* comm, double* clock) {
    ClockScope timed(clock);
    return allreduce(x, *comm);
  }
  static variable_list backward(AutogradContext*, variable_list grads) {
    return {grads[0], at::Tensor(), at::Tensor()};
  }
};

struct ScatterToRegion : torch::autograd::Function<ScatterToRegion> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, ccl::Communicator* comm, int64_t dim,
                            double* clock) {
    save_comm(ctx, comm, clock);
    ctx->saved_data["dim"] = dim;
    return local_slice(x, comm->rank(), comm->size(), dim).clone();
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    ClockScope timed(saved_clock(ctx));
    return {allgather(grads[0], saved_comm(ctx), ctx->saved_data["dim"].toInt()), at::Tensor(), at::Tensor(),
            at::Tensor()};
  }
};

struct GatherFromRegion : torch::autograd::Function<GatherFromRegion> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, ccl::Communicator* comm, int64_t dim,
                            double* clock) {
    save_comm(ctx, comm, clock);
    ctx->saved_data["dim"] = dim;
    ClockScope timed(clock);
    return allgather(x, *comm, dim);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    ccl::Communicator& comm = saved_comm(ctx);
    return {local_slice(grads[0], comm.rank(), comm.size(), ctx->saved_data["dim"].toInt()).contiguous(),
            at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

ccl::DType ccl_dtype(at::ScalarType type) {
  switch (type) {
    case at::kFloat: return ccl::DType::f32;
    case at::kDouble: return ccl::DType::f64;
    case at::kHalf: return ccl::DType::f16;
    case at::kBFloat16: return ccl::DType::bf16;
    case at::kInt: return ccl::DType::i32;
    case at::kLong: return ccl::DType::i64;
    case at::kByte: return ccl::DType::u8;
    default: break;
  }
  throw Error(std::string("ccl has no dtype for tensors of ") + c10::toString(type));
}

bool ccl_reaches(const at::Tensor& tensor) {
  if (tensor.device().is_cpu()) return true;
  return tensor.device().is_cuda() && std::string(ccl::default_device_backend_name()) != "none";
}

void set_memory(ccl::OpOptions& options, const at::Tensor& tensor) {
  GIANT_CHECK(ccl_reaches(tensor), "ccl cannot reach a tensor on ", tensor.device(), " (its device backend is ",
              ccl::default_device_backend_name(), "; build with GIANT_CUDA=ON for CUDA tensors)");
  options.memory = tensor.device().is_cpu() ? ccl::Memory::host : ccl::Memory::device;
  options.stream = nullptr;  // the default stream: libtorch's current one, as the trainer never changes it
}

namespace {
// The reduction of contiguous tensor `in` into `out` (the same tensor, or
// one of its size, dtype and device), in memory ccl reaches.
ccl::Work allreduce_into(const at::Tensor& in, const at::Tensor& out, ccl::Communicator& comm, ccl::ReduceOp op) {
  ccl::AllreduceOptions options;
  set_memory(options, in);
  options.input = in.data_ptr();
  options.output = out.data_ptr();
  options.count = static_cast<size_t>(in.numel());
  options.dtype = ccl_dtype(in.scalar_type());
  options.op = op;
  return ccl::allreduce(comm, options);
}
}  // namespace

ccl::Work allreduce_async(const at::Tensor& tensor, ccl::Communicator& comm, ccl::ReduceOp op) {
  GIANT_CHECK(ccl_reaches(tensor) && tensor.is_contiguous(),
              "allreduce_async needs contiguous memory ccl reaches, got a tensor on ", tensor.device());
  return allreduce_into(tensor, tensor, comm, op);
}

namespace {
// The size of block `rank` of a flat tensor split into comm.size() equal blocks.
size_t checked_block(const at::Tensor& flat, ccl::Communicator& comm, const char* what) {
  GIANT_CHECK(ccl_reaches(flat) && flat.is_contiguous() && flat.dim() == 1, what,
              " needs a flat contiguous tensor in memory ccl reaches, got ", flat.dim(), " dimension(s) on ",
              flat.device());
  GIANT_CHECK(flat.numel() % comm.size() == 0, what, ": ", flat.numel(), " elements do not split into ",
              comm.size(), " equal blocks");
  return static_cast<size_t>(flat.numel() / comm.size());
}
}  // namespace

ccl::Work reduce_scatter_blocks_async(const at::Tensor& flat, ccl::Communicator& comm, ccl::ReduceOp op) {
  const size_t block = checked_block(flat, comm, "reduce_scatter_blocks_async");
  ccl::ReduceScatterOptions options;
  set_memory(options, flat);
  options.input = flat.data_ptr();
  options.output = static_cast<char*>(flat.data_ptr()) + comm.rank() * block * flat.element_size();
  options.count = block;
  options.dtype = ccl_dtype(flat.scalar_type());
  options.op = op;
  return ccl::reduce_scatter(comm, options);
}

ccl::Work allgather_blocks_async(const at::Tensor& flat, ccl::Communicator& comm) {
  const size_t block = checked_block(flat, comm, "allgather_blocks_async");
  ccl::AllgatherOptions options;
  set_memory(options, flat);
  options.input = static_cast<char*>(flat.data_ptr()) + comm.rank() * block * flat.element_size();
  options.output = flat.data_ptr();
  options.count = block;
  options.dtype = ccl_dtype(flat.scalar_type());
  return ccl::allgather(comm, options);
}

void allreduce_(const at::Tensor& tensor, ccl::Communicator& comm, ccl::ReduceOp op) {
  if (comm.size() == 1 && op != ccl::ReduceOp::avg) return;
  at::Tensor view = reachable_view(tensor);
  allreduce_async(view, comm, op).wait();
  if (!view.is_same(tensor)) tensor.copy_(view);
}

at::Tensor allreduce(const at::Tensor& tensor, ccl::Communicator& comm, ccl::ReduceOp op) {
  at::Tensor view = reachable_view(tensor);
  at::Tensor out = at::empty_like(view, at::MemoryFormat::Contiguous);
  allreduce_into(view, out, comm, op).wait();
  return out.to(tensor.device());
}

at::Tensor allgather(const at::Tensor& tensor, ccl::Communicator& comm, int64_t dim) {
  if (comm.size() == 1) return tensor;
  at::Tensor view = reachable_view(tensor);
  std::vector<int64_t> shape{comm.size()};
  for (int64_t s : view.sizes()) shape.push_back(s);
  at::Tensor gathered = at::empty(shape, view.options());
  ccl::AllgatherOptions options;
  set_memory(options, view);
  options.input = view.data_ptr();
  options.output = gathered.data_ptr();
  options.count = static_cast<size_t>(view.numel());
  options.dtype = ccl_dtype(view.scalar_type());
  ccl::allgather(comm, options).wait();
  return at::cat(gathered.unbind(0), dim).to(tensor.device());
}

at::Tensor local_slice(const at::Tensor& x, int rank, int size, int64_t dim) {
  GIANT_CHECK(x.size(dim) % size == 0, "dimension ", dim, " of size ", x.size(dim), " does not split over ",
              size, " ranks");
  const int64_t part = x.size(dim) / size;
  return x.narrow(dim, rank * part, part);
}

at::Tensor copy_to_region(const at::Tensor& x, ccl::Communicator& comm, double* comm_seconds) {
  return comm.size() == 1 ? x : CopyToRegion::apply(x, &comm, comm_seconds);
}
at::Tensor reduce_from_region(const at::Tensor& x, ccl::Communicator& comm, double* comm_seconds) {
  return comm.size() == 1 ? x : ReduceFromRegion::apply(x, &comm, comm_seconds);
}
at::Tensor scatter_to_region(const at::Tensor& x, ccl::Communicator& comm, int64_t dim, double* comm_seconds) {
  return comm.size() == 1 ? x : ScatterToRegion::apply(x, &comm, dim, comm_seconds);
}
at::Tensor gather_from_region(const at::Tensor& x, ccl::Communicator& comm, int64_t dim, double* comm_seconds) {
  return comm.size() == 1 ? x : GatherFromRegion::apply(x, &comm, dim, comm_seconds);
}

}  // namespace giant::parallel
