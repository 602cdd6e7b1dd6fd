#include "giant/parallel/data_parallel/sharded_unit.h"

#include <c10/core/CPUAllocator.h>
#include <torch/torch.h>

#include "giant/base/error.h"
#include "giant/parallel/tensor_collectives.h"

namespace giant::parallel {

ShardedUnit::ShardedUnit(std::vector<at::Tensor> parameters, std::vector<size_t> indices, int rank, int ranks,
                         at::ScalarType grad_dtype)
    : parameters_(std::move(parameters)), indices_(std::move(indices)), rank_(rank) {
  GIANT_CHECK(!parameters_.empty() && parameters_.size() == indices_.size(), "a ZeRO-3 unit needs parameters");
  at::NoGradGuard no_grad;
  const at::Tensor& first = parameters_.front();
  for (const auto& p : parameters_) {
    GIANT_CHECK(p.scalar_type() == first.scalar_type() && p.device() == first.device(),
                "a ZeRO-3 unit's parameters share one dtype and device");
    offsets_.push_back(elements_);
    elements_ += p.numel();
  }
  elements_ = (elements_ + ranks - 1) / ranks * ranks;  // equal blocks; the padding stays zero
  block_ = elements_ / ranks;
  const auto options = first.options().requires_grad(false);
  flat_ = torch::zeros({elements_}, options);
  for (size_t k = 0; k < parameters_.size(); ++k) {
    at::Tensor& p = parameters_[k];
    const int64_t n = p.numel();
    at::Tensor view = flat_.narrow(0, offsets_[k], n);
    view.copy_(p.reshape({n}));
    // Every holder of the parameter (its module, a tied reader) sees the
    // flat storage from now on.
    p.set_data(view.view(p.sizes()));
  }
  owned_ = flat_.narrow(0, rank_ * block_, block_).clone();
  grad_shard_ = torch::zeros({block_}, options.dtype(grad_dtype));
  release();
}

int64_t ShardedUnit::whole_bytes() const { return elements_ * static_cast<int64_t>(flat_.element_size()); }
int64_t ShardedUnit::owned_bytes() const { return block_ * static_cast<int64_t>(owned_.element_size()); }
int64_t ShardedUnit::grad_bytes() const { return block_ * static_cast<int64_t>(grad_shard_.element_size()); }

void ShardedUnit::allocate() {
  c10::StorageImpl* storage = flat_.storage().unsafeGetStorageImpl();
  c10::Allocator* allocator = storage->allocator() != nullptr ? storage->allocator() : c10::GetCPUAllocator();
  const auto bytes = static_cast<size_t>(whole_bytes());
  storage->set_data_ptr_noswap(allocator->allocate(bytes));
  storage->set_nbytes(bytes);
}

void ShardedUnit::start_gather(ccl::Communicator& comm) {
  if (residency_ != Residency::freed) return;
  allocate();
  at::NoGradGuard no_grad;
  // Through flat_, whose version counter is not the parameters': autograd's
  // saved views of them see the new data without a version change.
  flat_.narrow(0, rank_ * block_, block_).copy_(owned_);
  if (comm.size() > 1) {
    // The padding of the last block is the owner's zeros: nothing reads it.
    gather_ = allgather_blocks_async(flat_, comm);
    residency_ = Residency::gathering;
  } else {
    residency_ = Residency::gathered;
  }
}

bool ShardedUnit::wait_gathered(ccl::Communicator& comm) {
  if (residency_ == Residency::gathered) return false;
  start_gather(comm);
  if (residency_ == Residency::gathering) {
    residency_ = Residency::gathered;  // even if it throws: release() then frees the memory
    gather_.wait();
  }
  return true;
}

void ShardedUnit::release() {
  if (residency_ == Residency::freed) return;
  if (residency_ == Residency::gathering) {
    residency_ = Residency::gathered;
    gather_.wait();  // ccl writes the buffer until then
  }
  c10::StorageImpl* storage = flat_.storage().unsafeGetStorageImpl();
  storage->set_data_ptr_noswap(at::DataPtr(nullptr, flat_.device()));
  storage->set_nbytes(0);
  residency_ = Residency::freed;
}

}  // namespace giant::parallel
