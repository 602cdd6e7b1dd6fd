// This build's own device backend at world size 1: where no CUDA device is
// visible (or ccl was built without CUDA) a device operation fails with an
// error that says so; where one is, collectives run on device buffers and
// the host-only options are refused.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#if GIANT_CUDA
#include <cuda_runtime.h>
#endif

#include "giant/base/error.h"
#include "giant/ccl/backend.h"
#include "giant/ccl/collectives.h"

namespace giant::ccl {
namespace {

std::string device_allreduce_error(Communicator& comm, void* buffer) {
  AllreduceOptions o;
  o.memory = Memory::device;
  o.input = o.output = buffer;
  o.count = 1;
  try {
    allreduce(comm, o).wait();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

#if GIANT_CUDA
int visible_devices() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return count;
}

// Runs allreduce, broadcast, allgather and a barrier on one device.
void check_world_of_one_on_the_device(Communicator& comm) {
  std::vector<float> host{1.5f, -2.0f, 3.25f};
  const size_t bytes = host.size() * sizeof(float);
  float* in = nullptr;
  float* out = nullptr;
  ASSERT_EQ(cudaMalloc(&in, bytes), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&out, bytes), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(in, host.data(), bytes, cudaMemcpyHostToDevice), cudaSuccess);
  AllreduceOptions a;
  a.memory = Memory::device;
  a.input = in;
  a.output = out;
  a.count = host.size();
  allreduce(comm, a).wait();
  std::vector<float> back(host.size());
  ASSERT_EQ(cudaMemcpy(back.data(), out, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(back, host);
  AllgatherOptions g;
  g.memory = Memory::device;
  g.input = in;
  g.output = out;
  g.count = host.size();
  allgather(comm, g).wait();
  BarrierOptions b;
  b.memory = Memory::device;
  barrier(comm, b).wait();
  a.algorithm = Algorithm::ring;
  try {
    allreduce(comm, a);
    ADD_FAILURE() << "a host algorithm was accepted on device memory";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is for host memory"), std::string::npos) << e.what();
  }
  cudaFree(in);
  cudaFree(out);
}
#endif

TEST(NcclDevice, AWorldOfOneRunsOnTheDeviceOrSaysWhyItCannot) {
  auto comm = Communicator::create(nullptr, 0, 1);
  float value = 1.0f;
#if GIANT_CUDA
  EXPECT_STREQ(default_device_backend_name(), "nccl");
  if (visible_devices() > 0) {
    check_world_of_one_on_the_device(*comm);
    return;
  }
  const std::string error = device_allreduce_error(*comm, &value);
  EXPECT_NE(error.find("needs a CUDA device, and none is visible"), std::string::npos) << error;
#else
  EXPECT_STREQ(default_device_backend_name(), "none");
  const std::string error = device_allreduce_error(*comm, &value);
  EXPECT_NE(error.find("built without one"), std::string::npos) << error;
#endif
  // Host operations are untouched by the failed device backend.
  AllreduceOptions o;
  o.input = o.output = &value;
  o.count = 1;
  allreduce(*comm, o).wait();
  EXPECT_EQ(value, 1.0f);
  EXPECT_FALSE(comm->failed());
}

}  // namespace
}  // namespace giant::ccl
