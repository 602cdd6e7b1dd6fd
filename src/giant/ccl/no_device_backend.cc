// The device side of a build without one (GIANT_CUDA off): every device
// operation fails with an error that says how to get one.
#include "giant/base/error.h"
#include "giant/ccl/backend.h"
#include "giant/ccl/device_copier.h"

namespace giant::ccl {

std::unique_ptr<Backend> default_device_backend(const DeviceBackendContext& context) {
  throw Error("communicator '" + context.name +
              "': device memory needs a device backend, and this ccl was built without one (configure with "
              "-DGIANT_CUDA=ON, which needs the CUDA toolkit and NCCL)");
}

const char* default_device_backend_name() { return "none"; }

std::unique_ptr<DeviceCopier> default_device_copier() {
  throw Error("copying device memory needs CUDA, and this ccl was built without it (configure with -DGIANT_CUDA=ON)");
}

}  // namespace giant::ccl
