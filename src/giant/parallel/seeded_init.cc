#include "giant/parallel/seeded_init.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

namespace giant::parallel {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

uint64_t parameter_seed(uint64_t run_seed, int64_t layer_index, const std::string& name) {
  // FNV-1a of the name, mixed with the seed and index: stable across
  // platforms and standard libraries, unlike std::hash.
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : name) {
    h = (h ^ c) * 1099511628211ULL;
  }
  return splitmix64(splitmix64(run_seed) ^ splitmix64(h + static_cast<uint64_t>(layer_index)));
}

at::Tensor seeded_normal(at::IntArrayRef shape, double std, uint64_t parameter_seed,
                         const c10::TensorOptions& options) {
  at::Generator generator = at::detail::createCPUGenerator(parameter_seed);
  at::Tensor values = at::empty(shape, at::TensorOptions().dtype(at::kFloat));
  values.normal_(0.0, std, generator);
  return values.to(options);
}

}  // namespace giant::parallel
