# GIANT_CUDA: build ccl's NCCL device backend. On by default where the CUDA
# toolkit and NCCL are found (the toolkit is enough: no GPU is needed to
# build or to run the backend's device-free tests); OFF builds ccl with no
# device backend, whose device operations then fail saying so.
find_package(CUDAToolkit QUIET)
if(CUDAToolkit_FOUND)
  find_path(GIANT_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} ${CUDAToolkit_LIBRARY_ROOT}/include)
  find_library(GIANT_NCCL_LIBRARY nccl
               HINTS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}/lib ${CUDAToolkit_LIBRARY_ROOT}/lib64)
endif()
if(CUDAToolkit_FOUND AND GIANT_NCCL_INCLUDE_DIR AND GIANT_NCCL_LIBRARY)
  set(_giant_cuda_found ON)
else()
  set(_giant_cuda_found OFF)
endif()
option(GIANT_CUDA "Build ccl's NCCL device backend (needs the CUDA toolkit and NCCL)" ${_giant_cuda_found})
if(GIANT_CUDA AND NOT _giant_cuda_found)
  message(FATAL_ERROR "GIANT_CUDA is ON, but the CUDA toolkit or NCCL was not found "
                      "(toolkit: ${CUDAToolkit_FOUND}, nccl.h: ${GIANT_NCCL_INCLUDE_DIR}, "
                      "libnccl: ${GIANT_NCCL_LIBRARY})")
endif()
if(GIANT_CUDA)
  message(STATUS "GIANT_CUDA: ccl's NCCL backend (${GIANT_NCCL_LIBRARY}, CUDA ${CUDAToolkit_VERSION})")
endif()
