# Targets that use libtorch: giant_use_torch(target).
#
# torch/torch.h costs ~12 s and 1 GB per translation unit, so every libtorch
# target compiles it once as a precompiled header. ccache may cache the units
# that use it only when its sloppiness allows (scripts/build sets that).
function(giant_use_torch target)
  target_link_libraries(${target} PUBLIC torch)
  target_precompile_headers(${target} PRIVATE <torch/torch.h>)
endfunction()
