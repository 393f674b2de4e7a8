# Install rules, a CMake package config and a pkg-config file.
include(CMakePackageConfigHelpers)
install(TARGETS vyre_cuda EXPORT vyre_cuda_targets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${PROJECT_SOURCE_DIR}/include/vyre_cuda.h ${PROJECT_SOURCE_DIR}/include/vyre_cuda_loader.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT vyre_cuda_targets NAMESPACE vyre_cuda::
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/vyre_cuda)
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/vyre_cudaConfig.cmake.in
     "@PACKAGE_INIT@\ninclude(\"\${CMAKE_CURRENT_LIST_DIR}/vyre_cuda_targets.cmake\")\n")
configure_package_config_file(${CMAKE_CURRENT_BINARY_DIR}/vyre_cudaConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/vyre_cudaConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/vyre_cuda)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/vyre_cudaConfigVersion.cmake
  COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/vyre_cudaConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/vyre_cudaConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/vyre_cuda)
file(RELATIVE_PATH VYRE_PC_PREFIX_FROM_PCDIR
     ${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig ${CMAKE_INSTALL_PREFIX})
configure_file(${PROJECT_SOURCE_DIR}/cmake/vyre_cuda.pc.in ${CMAKE_CURRENT_BINARY_DIR}/vyre_cuda.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/vyre_cuda.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
