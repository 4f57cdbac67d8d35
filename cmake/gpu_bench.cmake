# bench/gpu_qmatvec.cu and bench/gpu_matvec.cu: quantized and f16/bf16 matrix-vector speed against the
# device copy bandwidth. They call the backend's internals (kernels/qmatvec.hpp, kernels/matvec.hpp),
# so they are built with the tests and not installed. Included from cmake/gpu.cmake (GPU builds only).
if(WICK_BUILD_TESTS)
  foreach(bench gpu_qmatvec gpu_matvec)
    add_executable(${bench} ${PROJECT_SOURCE_DIR}/bench/${bench}.cu)
    target_include_directories(${bench} PRIVATE ${PROJECT_SOURCE_DIR}/src)
    target_link_libraries(${bench} PRIVATE wick)
    if(WICK_GPU STREQUAL "cuda")
      set_target_properties(${bench} PROPERTIES CUDA_ARCHITECTURES "${WICK_GPU_TARGETS}" CUDA_STANDARD 20
                                                CUDA_STANDARD_REQUIRED ON CUDA_EXTENSIONS OFF)
      target_compile_options(${bench} PRIVATE --expt-relaxed-constexpr)
      target_compile_definitions(${bench} PRIVATE WICK_GPU_CUDA)
    else()
      set_source_files_properties(${PROJECT_SOURCE_DIR}/bench/${bench}.cu PROPERTIES LANGUAGE HIP)
      set_target_properties(${bench} PROPERTIES HIP_ARCHITECTURES "${WICK_GPU_TARGETS}" HIP_STANDARD 20
                                                HIP_STANDARD_REQUIRED ON)
      target_compile_definitions(${bench} PRIVATE WICK_GPU_HIP)
    endif()
  endforeach()
  # Public API only (attention_kv_len inside a recorded graph): a host C++ program.
  add_executable(gpu_attention_decode ${PROJECT_SOURCE_DIR}/bench/gpu_attention_decode.cpp)
  target_link_libraries(gpu_attention_decode PRIVATE wick)
  # The sampler's top-k candidates path against the whole row on the host.
  add_executable(gpu_sampler ${PROJECT_SOURCE_DIR}/bench/gpu_sampler.cpp)
  target_link_libraries(gpu_sampler PRIVATE wick_llm)
endif()
