#include "giant/parallel/data_parallel/bucket_layout.h"

#include <algorithm>

#include <torch/torch.h>

#include "giant/ccl/shared_buffer.h"

namespace giant::parallel {
namespace {

// Groups the parameters, last first, into buckets of one dtype and device.
std::vector<std::vector<size_t>> group_parameters(const std::vector<at::Tensor>& parameters, int64_t bucket_bytes,
                                                  c10::optional<at::ScalarType> grad_dtype,
                                                  const std::vector<size_t>& alone) {
  std::vector<std::vector<size_t>> groups;
  int64_t bytes = 0;
  std::vector<bool> is_alone(parameters.size());
  for (size_t i : alone) is_alone.at(i) = true;
  for (size_t i = parameters.size(); i-- > 0;) {
    const at::Tensor& p = parameters[i];
    const int64_t element_bytes = grad_dtype ? c10::elementSize(*grad_dtype) : p.element_size();
    const int64_t size = p.numel() * element_bytes;
    const bool fits = !groups.empty() && bytes + size <= bucket_bytes && !is_alone[i] &&
                      !is_alone[groups.back().front()] &&
                      parameters[groups.back().front()].scalar_type() == p.scalar_type() &&
                      parameters[groups.back().front()].device() == p.device();
    if (!fits) {
      groups.emplace_back();
      bytes = 0;
    }
    groups.back().push_back(i);
    bytes += size;
  }
  return groups;
}

}  // namespace

BucketLayout lay_out_buckets(const std::vector<at::Tensor>& parameters, int64_t bucket_bytes,
                             c10::optional<at::ScalarType> grad_dtype, const std::vector<size_t>& alone, int blocks) {
  BucketLayout layout;
  layout.places.resize(parameters.size());
  for (auto& members : group_parameters(parameters, bucket_bytes, grad_dtype, alone)) {
    BucketLayout::Bucket bucket;
    const at::Tensor& first = parameters[members.front()];
    bucket.parameter_options = first.options().requires_grad(false);
    bucket.gradient_options =
        grad_dtype ? bucket.parameter_options.dtype(*grad_dtype) : bucket.parameter_options;
    for (size_t i : members) {
      layout.places[i] = {layout.buckets.size(), bucket.content};
      bucket.content += parameters[i].numel();
    }
    // Padded to equal blocks (the padding stays zero).
    bucket.elements = (bucket.content + blocks - 1) / blocks * blocks;
    bucket.members = std::move(members);
    layout.largest = std::max(layout.largest, bucket.elements);
    layout.buckets.push_back(std::move(bucket));
  }
  return layout;
}

at::Tensor bucket_storage(ccl::Communicator* comm, int64_t elements, const at::TensorOptions& options) {
  if (comm == nullptr || !options.device().is_cpu()) return torch::zeros({elements}, options);
  auto shared = ccl::allocate_shared_buffer(*comm, static_cast<size_t>(elements) * options.dtype().itemsize());
  void* data = shared->data();
  return torch::from_blob(data, {elements}, [shared](void*) mutable { shared.reset(); }, options);
}

}  // namespace giant::parallel
