// The device copier of a CUDA build (device_copier.h): copies on a stream
// of its own, on the device current where it was made, whichever thread
// calls.
#include <cuda_runtime.h>

#include "giant/ccl/device_copier.h"
#include "giant/ccl/nccl_support.h"

namespace giant::ccl {
namespace {

class CudaCopier final : public DeviceCopier {
 public:
  CudaCopier() {
    detail::check_cuda(cudaGetDevice(&device_), "cudaGetDevice");
    detail::check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  }
  ~CudaCopier() override { cudaStreamDestroy(stream_); }
  CudaCopier(const CudaCopier&) = delete;
  CudaCopier& operator=(const CudaCopier&) = delete;

  void to_host(void* host, const void* device, size_t bytes, void* stream) override {
    detail::check_cuda(cudaSetDevice(device_), "cudaSetDevice");
    // What the caller queued on its stream (the producer of `device`) first.
    detail::check_cuda(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "cudaStreamSynchronize");
    detail::check_cuda(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, stream_), "cudaMemcpyAsync");
    detail::check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }

  void to_device(void* device, const void* host, size_t bytes) override {
    detail::check_cuda(cudaSetDevice(device_), "cudaSetDevice");
    detail::check_cuda(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync");
    detail::check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }

 private:
  int device_ = 0;
  cudaStream_t stream_ = nullptr;
};

}  // namespace

std::unique_ptr<DeviceCopier> default_device_copier() { return std::make_unique<CudaCopier>(); }

}  // namespace giant::ccl
