# Install rules: headers, libwick and libwick_llm (static or shared), the wick tool, the CMake package
# (wickConfig.cmake, wickConfigVersion.cmake, wickTargets.cmake exporting wick::wick and wick::llm),
# wick.pc and wick-llm.pc.
# Included from the top-level CMakeLists after the library (and cmake/gpu.cmake) are defined.
include(CMakePackageConfigHelpers)
set(WICK_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/wick)

install(TARGETS wick wick_llm EXPORT wickTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/wick DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.hpp")
if(TARGET wick_cli)
  install(TARGETS wick_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
install(EXPORT wickTargets NAMESPACE wick:: DESTINATION ${WICK_CMAKE_DIR})

# What the config file needs to recreate wick's link dependencies on the consumer's side.
get_filename_component(WICK_OPENBLAS_DIR "${WICK_OPENBLAS_LIB}" DIRECTORY)
if(NOT DEFINED WICK_ROCM_PATH)
  set(WICK_ROCM_PATH "")
endif()
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/wickConfig.cmake.in
  ${PROJECT_BINARY_DIR}/wickConfig.cmake INSTALL_DESTINATION ${WICK_CMAKE_DIR})
# 0.x: a minor version may change the API, so only the same major.minor is compatible.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/wickConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/wickConfig.cmake ${PROJECT_BINARY_DIR}/wickConfigVersion.cmake
        DESTINATION ${WICK_CMAKE_DIR})

# pkg-config. The prefix is found from the .pc file's own place, so `cmake --install --prefix P`
# and moving the tree both work. A static libwick lists its dependencies in Libs (pkg-config users
# rarely pass --static); a shared one links them itself and keeps them in Libs.private.
set(wick_pc_deps "")
if(NOT WICK_OPENBLAS_DIR IN_LIST CMAKE_CXX_IMPLICIT_LINK_DIRECTORIES)
  string(APPEND wick_pc_deps " -L${WICK_OPENBLAS_DIR}")
endif()
string(APPEND wick_pc_deps " -lopenblas ${CMAKE_THREAD_LIBS_INIT}")
if(WICK_GPU STREQUAL "cuda")
  string(APPEND wick_pc_deps " -L${CUDAToolkit_LIBRARY_DIR} -lcudart -lcublas")
elseif(WICK_GPU STREQUAL "rocm")
  string(APPEND wick_pc_deps " -L${WICK_ROCM_PATH}/lib -lamdhip64 -lrocblas")
endif()
# A static library lists its dependencies in Libs, a shared one (which links them itself) in Libs.private.
function(wick_pc_libs deps libs_var private_var)
  if(BUILD_SHARED_LIBS)
    set(${libs_var} "" PARENT_SCOPE)
    set(${private_var} "${deps}" PARENT_SCOPE)
  else()
    set(${libs_var} "${deps}" PARENT_SCOPE)
    set(${private_var} "" PARENT_SCOPE)
  endif()
endfunction()
wick_pc_libs("${wick_pc_deps}" WICK_PC_LIBS WICK_PC_LIBS_PRIVATE)
# The plain public definitions of wick::wick (e.g. WICK_HAVE_GPU), as the CMake package exports them.
set(WICK_PC_CFLAGS "")
get_target_property(wick_pub_defs wick INTERFACE_COMPILE_DEFINITIONS)
if(wick_pub_defs)
  foreach(d IN LISTS wick_pub_defs)
    if(NOT d MATCHES "[$\"' ]")
      string(APPEND WICK_PC_CFLAGS " -D${d}")
    endif()
  endforeach()
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}" OR IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  message(FATAL_ERROR "wick: CMAKE_INSTALL_LIBDIR and CMAKE_INSTALL_INCLUDEDIR must be relative to the prefix "
                      "(got '${CMAKE_INSTALL_LIBDIR}', '${CMAKE_INSTALL_INCLUDEDIR}'); the package is relocatable")
endif()
file(RELATIVE_PATH WICK_PC_UP "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
string(REGEX REPLACE "/$" "" WICK_PC_UP "${WICK_PC_UP}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/wick.pc.in ${PROJECT_BINARY_DIR}/wick.pc @ONLY)
# The LLM runtime is a second package (Requires: wick) rather than a second -l in wick.pc, so a
# program that uses only tensors links only libwick, as with the CMake targets wick::wick / wick::llm.
# libwick_llm's own dependency (PCRE2), by the same rule as libwick's.
get_filename_component(WICK_PCRE2_DIR "${WICK_PCRE2_LIB}" DIRECTORY)
set(wick_llm_pc_deps "")
if(NOT WICK_PCRE2_DIR IN_LIST CMAKE_CXX_IMPLICIT_LINK_DIRECTORIES)
  string(APPEND wick_llm_pc_deps " -L${WICK_PCRE2_DIR}")
endif()
string(APPEND wick_llm_pc_deps " -lpcre2-8")
wick_pc_libs("${wick_llm_pc_deps}" WICK_LLM_PC_LIBS WICK_LLM_PC_LIBS_PRIVATE)
configure_file(${PROJECT_SOURCE_DIR}/cmake/wick-llm.pc.in ${PROJECT_BINARY_DIR}/wick-llm.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/wick.pc ${PROJECT_BINARY_DIR}/wick-llm.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
