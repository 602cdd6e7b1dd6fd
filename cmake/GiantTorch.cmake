# Targets that use libtorch: giant_use_torch(target).
#
# torch/torch.h costs ~12 s and 1 GB per translation unit, and its
# precompiled header ~40 s and 700 MB, which ccache does not cache. So the
# header is compiled once per kind of target (libraries are built -fPIC,
# executables -fPIE, and gcc refuses a header built with the other) by the
# first target of that kind, and every later one reuses it. ccache may cache
# the units that use it only when its sloppiness allows (scripts/build sets
# that).
#
# A layer's units are also compiled a few at a time as one (a unity build,
# GIANT_UNITY_BUILD): what they share of torch's inline templates is then
# instantiated, optimized and described for the debugger once per batch
# instead of once per file.
option(GIANT_UNITY_BUILD "Compile the libtorch layers' units in batches (unity build)" ON)
set(GIANT_UNITY_BATCH_SIZE 6 CACHE STRING "Units per batch of a unity build")

function(giant_use_torch target)
  target_link_libraries(${target} PUBLIC torch)
  get_target_property(_type ${target} TYPE)
  if(GIANT_UNITY_BUILD AND NOT _type STREQUAL "EXECUTABLE")
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE ${GIANT_UNITY_BATCH_SIZE})
  endif()
  if(NOT _type STREQUAL "EXECUTABLE")
    set(_type LIBRARY)
  endif()
  get_property(_owner GLOBAL PROPERTY GIANT_TORCH_PCH_${_type})
  if(_owner)
    target_precompile_headers(${target} REUSE_FROM ${_owner})
    # A header gcc refuses is parsed again in every unit, 12 s each: fail
    # instead (e.g. a define on a whole target; put it on the one file).
    target_compile_options(${target} PRIVATE $<$<CXX_COMPILER_ID:GNU>:-Werror=invalid-pch>)
  else()
    target_precompile_headers(${target} PRIVATE <torch/torch.h>)
    set_property(GLOBAL PROPERTY GIANT_TORCH_PCH_${_type} ${target})
  endif()
endfunction()
