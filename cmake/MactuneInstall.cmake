# `cmake --install` exports the CMake package `mactune`: headers under include/mactune, the
# libraries a serving engine links (kernels, schedules) and mactuneConfig.cmake, so another
# project does find_package(mactune) and links mactune::schedules.
include(CMakePackageConfigHelpers)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/kernels ${PROJECT_SOURCE_DIR}/schedules
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/mactune
        FILES_MATCHING PATTERN "*.h" PATTERN "*.cuh")

get_property(_mactune_exported GLOBAL PROPERTY MACTUNE_EXPORTED_TARGETS)
install(TARGETS mactune_kernels ${_mactune_exported} EXPORT mactuneTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT mactuneTargets NAMESPACE mactune::
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/mactune)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/mactuneConfig.cmake.in
  ${PROJECT_BINARY_DIR}/mactuneConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/mactune)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/mactuneConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/mactuneConfig.cmake ${PROJECT_BINARY_DIR}/mactuneConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/mactune)
