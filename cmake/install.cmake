# What `cmake --install <build> --prefix P` puts under P, for a project that builds against
# cake with find_package(cake CONFIG REQUIRED):
#   lib/libcake.so.<major.minor> (+ links)  cake::cake, the C ABI and the C++ API
#   lib/libcake.a                           cake::cake_static, the same linked into the user's binary
#   libexec/cake_compile_worker             found from the library and cakec by relative path
#   bin/cakec                               the CLI
#   include/cake/                           the public headers and the layer headers they include
#   lib/cmake/cake/                         cakeConfig.cmake, its version file, the targets
# (lib/ and the others are GNUInstallDirs' folders.) tests/install_consumer_test.sh builds a
# project against an install and runs it.
include(CMakePackageConfigHelpers)

# Everything include/cake/ includes from the layers, by name: the consumer test fails to
# compile when one is missing.
set(CAKE_LAYER_HEADERS
  runtime/base/arch.hpp runtime/base/error.hpp runtime/base/folder_trust.hpp runtime/base/json_doc.hpp
  runtime/cuda/driver.hpp runtime/cuda/driver_types.hpp
  runtime/jit/disk_cache.hpp runtime/jit/loader.hpp runtime/jit/nvrtc.hpp runtime/jit/prebuild.hpp
  runtime/jit/renderer.hpp
  runtime/model/aot_manifest.hpp runtime/model/availability.hpp runtime/model/nvrtc_info.hpp
  runtime/model/program_params.hpp runtime/model/registry.hpp
  runtime/planner/planner.hpp)
file(GLOB CAKE_API_HEADERS ${PROJECT_SOURCE_DIR}/include/cake/*.h ${PROJECT_SOURCE_DIR}/include/cake/*.hpp)
list(TRANSFORM CAKE_LAYER_HEADERS PREPEND ${PROJECT_SOURCE_DIR}/)
install(FILES ${CAKE_API_HEADERS} ${CAKE_LAYER_HEADERS} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/cake)

install(TARGETS cake cake_static EXPORT cakeTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS cake_compile_worker DESTINATION ${CMAKE_INSTALL_LIBEXECDIR})
install(TARGETS cakec DESTINATION ${CMAKE_INSTALL_BINDIR})

set(CAKE_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/cake)
install(EXPORT cakeTargets NAMESPACE cake:: DESTINATION ${CAKE_CMAKE_DIR})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/cakeConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/cakeConfig.cmake INSTALL_DESTINATION ${CAKE_CMAKE_DIR})
# 0.x: a minor version may change the ABI, so only the same minor version is compatible.
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/cakeConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/cakeConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/cakeConfigVersion.cmake
  DESTINATION ${CAKE_CMAKE_DIR})

# The Python package (pyproject.toml, scikit-build-core): libcake.so and the worker side by
# side in cake/_lib/, where the library finds the worker beside itself. One file, no links (a
# wheel would hold each link as a copy).
if(SKBUILD)
  install(FILES $<TARGET_FILE:cake> DESTINATION cake/_lib RENAME libcake.so COMPONENT python)
  install(PROGRAMS $<TARGET_FILE:cake_compile_worker> DESTINATION cake/_lib COMPONENT python)
endif()
