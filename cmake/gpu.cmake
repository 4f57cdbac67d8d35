# The GPU backend: one source (src/backend/gpu) built by nvcc for CUDA or by ROCm's clang
# for HIP. Included from the top-level CMakeLists (languages must be enabled there).
set(WICK_GPU_TARGETS "" CACHE STRING
    "GPU architectures: CUDA compute capabilities (80;90) or AMD gfx names (gfx90a;gfx942;...)")
file(GLOB WICK_GPU_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/backend/gpu/*.cu
     ${PROJECT_SOURCE_DIR}/src/backend/gpu/kernels/*.cu)
# The Hopper attention kernel uses wgmma, which only sm_90a code has: built alone for that arch
# (below) where the CUDA targets include 90, and taken only on compute capability 9.0 devices.
set(wick_wgmma_src ${PROJECT_SOURCE_DIR}/src/backend/gpu/kernels/attention_flash_wgmma.cu)
list(REMOVE_ITEM WICK_GPU_SOURCES ${wick_wgmma_src})

if(WICK_GPU STREQUAL "cuda")
  if(WICK_GPU_TARGETS STREQUAL "")
    set(WICK_GPU_TARGETS "80;90")
  endif()
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  set(CMAKE_CUDA_ARCHITECTURES "${WICK_GPU_TARGETS}")
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
  target_sources(wick PRIVATE ${WICK_GPU_SOURCES})
  # CMake 3.25 does not know nvcc's C++20 flag (nvcc 12+ has it)
  if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION OR CMAKE_CUDA20_STANDARD_COMPILE_OPTION STREQUAL "")
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  endif()
  set_target_properties(wick PROPERTIES CUDA_ARCHITECTURES "${WICK_GPU_TARGETS}" CUDA_STANDARD 20
                                        CUDA_STANDARD_REQUIRED ON CUDA_EXTENSIONS OFF)
  target_compile_options(wick PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr -Xcompiler=-Wall,-Wextra
      $<$<BOOL:${WICK_WERROR}>:-Werror=all-warnings>>)
  target_link_libraries(wick PUBLIC CUDA::cudart CUDA::cublas)
  target_compile_definitions(wick PUBLIC WICK_HAVE_GPU PRIVATE WICK_GPU_CUDA)
  if(WICK_GPU_EMULATE STREQUAL "off" AND WICK_GPU_TARGETS MATCHES "(^|;)90")
    add_library(wick_wgmma OBJECT ${wick_wgmma_src})
    set_target_properties(wick_wgmma PROPERTIES CUDA_ARCHITECTURES OFF CUDA_STANDARD 20 CUDA_STANDARD_REQUIRED ON
                                                CUDA_EXTENSIONS OFF POSITION_INDEPENDENT_CODE ON)
    target_compile_options(wick_wgmma PRIVATE --generate-code=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr
      -Xcompiler=-Wall,-Wextra $<$<BOOL:${WICK_WERROR}>:-Werror=all-warnings>)
    target_include_directories(wick_wgmma PRIVATE ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/src)
    target_compile_definitions(wick_wgmma PRIVATE WICK_HAVE_GPU WICK_GPU_CUDA)
    target_link_libraries(wick_wgmma PRIVATE CUDA::cudart)
    target_sources(wick PRIVATE $<TARGET_OBJECTS:wick_wgmma>)
    target_compile_definitions(wick PRIVATE WICK_HAVE_WGMMA)
  endif()
  # AMD paths executed on the NVIDIA GPU (docs/gpu.md): device code behaves as on AMD CDNA (64-lane
  # waves emulated on warp pairs) or RDNA (32 lanes), with AMD's tuning and portable paths.
  if(WICK_GPU_EMULATE STREQUAL "cdna")
    target_compile_definitions(wick PRIVATE WICK_EMULATE_AMD=1 WICK_EMULATE_WAVE=64)
  elseif(WICK_GPU_EMULATE STREQUAL "rdna")
    target_compile_definitions(wick PRIVATE WICK_EMULATE_AMD=1 WICK_EMULATE_WAVE=32)
  elseif(NOT WICK_GPU_EMULATE STREQUAL "off")
    message(FATAL_ERROR "WICK_GPU_EMULATE must be off, cdna or rdna (got '${WICK_GPU_EMULATE}')")
  endif()
elseif(WICK_GPU STREQUAL "rocm")
  if(NOT WICK_GPU_EMULATE STREQUAL "off")
    message(FATAL_ERROR "WICK_GPU_EMULATE=${WICK_GPU_EMULATE} is for -DWICK_GPU=cuda (AMD paths run on an NVIDIA GPU); "
                        "a ROCm build is the real thing")
  endif()
  if(DEFINED ENV{ROCM_PATH})
    set(WICK_ROCM_PATH $ENV{ROCM_PATH})
  elseif(EXISTS /opt/rocm)
    set(WICK_ROCM_PATH /opt/rocm)
  else()
    set(WICK_ROCM_PATH /usr)  # Debian's packages
  endif()
  list(APPEND CMAKE_PREFIX_PATH ${WICK_ROCM_PATH} ${WICK_ROCM_PATH}/lib/cmake)
  if(WICK_GPU_TARGETS STREQUAL "")
    set(WICK_GPU_TARGETS "gfx90a;gfx942;gfx1030;gfx1100;gfx1101;gfx1200;gfx1201")
    set(wick_trim_targets ON)
  endif()
  if(NOT CMAKE_HIP_COMPILER)
    # ROCm says where its clang is (`hipconfig -l`: /usr/lib/llvm-21/bin on Debian forky); the
    # usual places are fallbacks for installs without hipconfig.
    set(wick_hip_candidates "")
    find_program(WICK_HIPCONFIG hipconfig HINTS ${WICK_ROCM_PATH}/bin)
    if(WICK_HIPCONFIG)
      execute_process(COMMAND ${WICK_HIPCONFIG} -l OUTPUT_VARIABLE wick_hip_llvm_bin
                      OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
      if(rc EQUAL 0 AND NOT wick_hip_llvm_bin STREQUAL "")
        list(APPEND wick_hip_candidates ${wick_hip_llvm_bin}/clang++)
      endif()
    endif()
    list(APPEND wick_hip_candidates ${WICK_ROCM_PATH}/lib/llvm/bin/clang++ ${WICK_ROCM_PATH}/llvm/bin/clang++
         /usr/bin/clang++-17 /usr/bin/clang++)
    foreach(c ${wick_hip_candidates})
      if(EXISTS ${c})
        set(CMAKE_HIP_COMPILER ${c})
        break()
      endif()
    endforeach()
    if(NOT CMAKE_HIP_COMPILER)
      string(REPLACE ";" ", " wick_looked "${wick_hip_candidates}")
      message(FATAL_ERROR "wick: no HIP compiler found (looked in ${wick_looked}); install ROCm's hipcc "
                          "(Debian: hipcc) or pass -DCMAKE_HIP_COMPILER=/path/to/clang++")
    endif()
  endif()
  # Keep only the targets this compiler knows (ROCm 5.7 has no gfx12), saying so.
  set(wick_ok_targets "")
  foreach(t ${WICK_GPU_TARGETS})
    execute_process(COMMAND ${CMAKE_HIP_COMPILER} -x hip --offload-arch=${t} --cuda-device-only -nogpulib
                            -nogpuinc -fsyntax-only -
                    INPUT_FILE /dev/null RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
    if(rc EQUAL 0)
      list(APPEND wick_ok_targets ${t})
    elseif(wick_trim_targets)
      message(STATUS "wick: ${CMAKE_HIP_COMPILER} cannot build for ${t}; leaving it out")
    else()
      message(FATAL_ERROR "wick: ${CMAKE_HIP_COMPILER} cannot build for ${t} (from WICK_GPU_TARGETS)")
    endif()
  endforeach()
  set(WICK_GPU_TARGETS "${wick_ok_targets}")
  set(CMAKE_HIP_ARCHITECTURES "${WICK_GPU_TARGETS}")
  enable_language(HIP)
  find_package(hip REQUIRED CONFIG)
  find_package(rocblas REQUIRED CONFIG)
  set_source_files_properties(${WICK_GPU_SOURCES} PROPERTIES LANGUAGE HIP)
  target_sources(wick PRIVATE ${WICK_GPU_SOURCES})
  set_target_properties(wick PROPERTIES HIP_ARCHITECTURES "${WICK_GPU_TARGETS}" HIP_STANDARD 20
                                        HIP_STANDARD_REQUIRED ON)
  target_compile_options(wick PRIVATE $<$<COMPILE_LANGUAGE:HIP>:-Wall -Wextra $<$<BOOL:${WICK_WERROR}>:-Werror>>)
  target_link_libraries(wick PUBLIC hip::host roc::rocblas)
  # HIP links pass --offload-arch too, which clang reports as unused at link time
  target_link_options(wick INTERFACE -Wno-unused-command-line-argument)
  target_compile_definitions(wick PUBLIC WICK_HAVE_GPU PRIVATE WICK_GPU_HIP)
  # CI's scratch check (scripts/amd_resource_usage.sh --log): hip-clang's per-kernel resource remarks
  # (registers, scratch, spills, occupancy) in the build output. They are remarks, never warnings, so
  # -Werror leaves them be. They do not name the target, so each translation unit gets (-include) an
  # empty marker kernel per target, wick_remarks_target_<gfx>, defined first so that its remark opens
  # that target's remarks; the parser checks that every record follows a marker.
  option(WICK_AMD_RESOURCE_REMARKS "Print hip-clang's kernel resource remarks while building (CI)" OFF)
  if(WICK_AMD_RESOURCE_REMARKS)
    set(wick_marker "// generated by cmake/gpu.cmake for WICK_AMD_RESOURCE_REMARKS\n#ifdef __HIP_DEVICE_COMPILE__\n")
    string(REGEX REPLACE ":[^;]*" "" wick_gfx "${WICK_GPU_TARGETS}")  # gfx90a:xnack+ -> gfx90a
    list(REMOVE_DUPLICATES wick_gfx)
    foreach(t ${wick_gfx})
      string(APPEND wick_marker "#ifdef __${t}__\nextern \"C\" __attribute__((global)) void wick_remarks_target_${t}() {}\n#endif\n")
    endforeach()
    string(APPEND wick_marker "#endif\n")
    file(CONFIGURE OUTPUT ${PROJECT_BINARY_DIR}/wick_remarks_target.h CONTENT "${wick_marker}")
    target_compile_options(wick PRIVATE
      $<$<COMPILE_LANGUAGE:HIP>:-Rpass-analysis=kernel-resource-usage -include ${PROJECT_BINARY_DIR}/wick_remarks_target.h>)
  endif()
else()
  message(FATAL_ERROR "WICK_GPU must be off, cuda or rocm (got '${WICK_GPU}')")
endif()
# commas in the C string: a semicolon would split the definition
string(REPLACE ";" "," wick_targets_commas "${WICK_GPU_TARGETS}")
target_compile_definitions(wick PRIVATE "WICK_GPU_TARGETS_STR=\"${wick_targets_commas}\"")
message(STATUS "wick: GPU backend ${WICK_GPU} for ${WICK_GPU_TARGETS} (AMD emulation: ${WICK_GPU_EMULATE})")
include(${PROJECT_SOURCE_DIR}/cmake/gpu_bench.cmake)  # bench/gpu_qmatvec, bench/gpu_matvec
