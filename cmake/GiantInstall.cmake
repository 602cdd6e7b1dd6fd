# `cmake --install`: every layer built here as Giant::<layer> (its library
# and headers), the giant command, and GiantConfig.cmake, which finds what
# the installed targets link (Torch for the layers that use it). Included
# once every target exists.
#
# The torch layers' precompiled header (cmake/GiantTorch.cmake) is a PRIVATE
# build-tree property: the exported targets carry no PCH usage
# requirement (tests/package/check_installed_package.sh checks that).

include(CMakePackageConfigHelpers)

set(_giant_libraries)
foreach(layer ${GIANT_LAYERS})
  if(NOT TARGET giant_${layer})
    continue()
  endif()
  list(APPEND _giant_libraries giant_${layer})
  set_target_properties(giant_${layer} PROPERTIES EXPORT_NAME ${layer})
  target_compile_features(giant_${layer} PUBLIC cxx_std_17)  # the headers need it, in consumers too
  install(DIRECTORY src/giant/${layer} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/giant
          FILES_MATCHING PATTERN "*.h")
endforeach()
install(TARGETS ${_giant_libraries} EXPORT GiantTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
if(TARGET giant)
  install(TARGETS giant RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
if(TARGET giant-bench)  # run by `giant bench` from beside the giant command
  install(TARGETS giant-bench RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
if(TARGET giant_sentencepiece)  # loaded by giant_data from ../LIBDIR/giant/ beside the program
  install(TARGETS giant_sentencepiece LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/giant)
endif()
install(EXPORT GiantTargets NAMESPACE Giant:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Giant)

# What GiantConfig.cmake finds before it loads the targets: the packages
# whose targets the installed ones link (the libraries are static, so their
# private dependencies too).
set(GIANT_CONFIG_DEPENDENCIES "find_dependency(Threads)\nfind_dependency(OpenSSL COMPONENTS Crypto)\n")
if(GIANT_CUDA)  # ccl's NCCL backend links CUDA::cudart
  string(APPEND GIANT_CONFIG_DEPENDENCIES "find_dependency(CUDAToolkit)\n")
endif()
if(TARGET giant_planner OR TARGET giant_train)
  string(APPEND GIANT_CONFIG_DEPENDENCIES "find_dependency(tomlplusplus)\n")
endif()
if(TARGET giant_data)
  # pkg-config's targets for what giant_data links: one file, included by the build too.
  install(FILES cmake/GiantDataDependencies.cmake DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Giant)
  string(APPEND GIANT_CONFIG_DEPENDENCIES "include(\"\${CMAKE_CURRENT_LIST_DIR}/GiantDataDependencies.cmake\")\n")
endif()
if(TARGET giant_parallel)
  string(APPEND GIANT_CONFIG_DEPENDENCIES "find_dependency(Torch)\n")
endif()
configure_package_config_file(cmake/GiantConfig.cmake.in ${PROJECT_BINARY_DIR}/GiantConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Giant)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/GiantConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/GiantConfig.cmake ${PROJECT_BINARY_DIR}/GiantConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Giant)
