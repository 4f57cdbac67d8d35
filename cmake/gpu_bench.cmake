# bench/gpu_qmatvec.cu: quantized matrix-vector speed against the device copy bandwidth. It calls the
# backend's internals (kernels/qmatvec.hpp), so it is built with the tests and not installed.
# Included from cmake/gpu.cmake (GPU builds only).
if(WICK_BUILD_TESTS)
  add_executable(gpu_qmatvec ${PROJECT_SOURCE_DIR}/bench/gpu_qmatvec.cu)
  target_include_directories(gpu_qmatvec PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(gpu_qmatvec PRIVATE wick)
  if(WICK_GPU STREQUAL "cuda")
    set_target_properties(gpu_qmatvec PROPERTIES CUDA_ARCHITECTURES "${WICK_GPU_TARGETS}" CUDA_STANDARD 20
                                                 CUDA_STANDARD_REQUIRED ON CUDA_EXTENSIONS OFF)
    target_compile_options(gpu_qmatvec PRIVATE --expt-relaxed-constexpr)
    target_compile_definitions(gpu_qmatvec PRIVATE WICK_GPU_CUDA)
  else()
    set_source_files_properties(${PROJECT_SOURCE_DIR}/bench/gpu_qmatvec.cu PROPERTIES LANGUAGE HIP)
    set_target_properties(gpu_qmatvec PROPERTIES HIP_ARCHITECTURES "${WICK_GPU_TARGETS}" HIP_STANDARD 20
                                                 HIP_STANDARD_REQUIRED ON)
    target_compile_definitions(gpu_qmatvec PRIVATE WICK_GPU_HIP)
  endif()
endif()
