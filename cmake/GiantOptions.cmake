# Warnings and sanitizers for Giant's own targets: giant_apply_options(target).
function(giant_apply_options target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wno-unused-parameter)
  if(GIANT_SANITIZE)
    string(REPLACE ";" "," _san "${GIANT_SANITIZE}")
    target_compile_options(${target} PRIVATE -fsanitize=${_san} -fno-omit-frame-pointer
                           -fno-sanitize-recover=undefined)
    target_link_options(${target} PUBLIC -fsanitize=${_san})
  endif()
endfunction()
