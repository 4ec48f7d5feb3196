# `cmake --install` exports the CMake package `mactune`: headers under include/mactune (the
# repository's include paths, so "dispatcher/dispatch.h" and <mactune/dispatcher/dispatch.h> both
# work), the libraries a serving engine links (mactune::kernels, mactune::dispatch, and the
# compiled engines mactune::kernels_cpu, mactune::kernels_cuda for one that runs them) and
# mactuneConfig.cmake, so another project does
#   find_package(mactune REQUIRED)
#   target_link_libraries(app PRIVATE mactune::dispatch)
# (examples/dispatch is such a project; tests/dispatcher builds it against an install.)
include(CMakePackageConfigHelpers)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/kernels ${PROJECT_SOURCE_DIR}/dispatcher
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/mactune
        FILES_MATCHING PATTERN "*.h" PATTERN "*.cuh" PATTERN "*.inl"
        PATTERN "tools" EXCLUDE PATTERN "templates" EXCLUDE)

# Every library a layer registered (MACTUNE_EXPORTED_TARGETS), plus the compiled engines, each
# once.
get_property(_mactune_exported GLOBAL PROPERTY MACTUNE_EXPORTED_TARGETS)
set(_mactune_export mactune_kernels)
foreach(t ${_mactune_exported} mactune_kernels_cpu mactune_kernels_cuda)
  if(TARGET ${t} AND NOT t IN_LIST _mactune_export)
    list(APPEND _mactune_export ${t})
  endif()
endforeach()
install(TARGETS ${_mactune_export} EXPORT mactuneTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT mactuneTargets NAMESPACE mactune::
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/mactune)

# What mactuneConfig.cmake must find before the targets load.
set(MACTUNE_CONFIG_NEEDS_CUDA OFF)
if(TARGET mactune_kernels_cuda)
  set(MACTUNE_CONFIG_NEEDS_CUDA ON)
endif()
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/mactuneConfig.cmake.in
  ${PROJECT_BINARY_DIR}/mactuneConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/mactune)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/mactuneConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/mactuneConfig.cmake ${PROJECT_BINARY_DIR}/mactuneConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/mactune)
