#include "giant/parallel/seeded_init.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include "giant/base/hash.h"

namespace giant::parallel {

uint64_t parameter_seed(uint64_t run_seed, int64_t layer_index, const std::string& name) {
  return splitmix64(splitmix64(run_seed) ^ splitmix64(fnv1a(name) + static_cast<uint64_t>(layer_index)));
}

at::Tensor seeded_normal(at::IntArrayRef shape, double std, uint64_t parameter_seed,
                         const c10::TensorOptions& options) {
  at::Generator generator = at::detail::createCPUGenerator(parameter_seed);
  at::Tensor values = at::empty(shape, at::TensorOptions().dtype(at::kFloat));
  values.normal_(0.0, std, generator);
  return values.to(options);
}

}  // namespace giant::parallel
