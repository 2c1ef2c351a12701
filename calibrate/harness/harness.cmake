# The measurement harness fsdpsim-calibrate (included by ../CMakeLists.txt). Built only where
# the CUDA toolkit (nvcc, cudart, cuBLASLt) and NCCL are found; elsewhere a STATUS message says
# what is missing and the rest of the project builds as usual. Sets FSDPSIM_CALIBRATE_HARNESS to
# "built" or to the reason it was not (tests/unit/calibrate reports it).
option(FSDPSIM_BUILD_HARNESS "Build fsdpsim-calibrate where CUDA, NCCL and cuBLASLt are found" ON)

function(fsdpsim_skip_harness why)
  message(STATUS "fsdpsim-calibrate (calibration harness): not built: ${why}")
  set(FSDPSIM_CALIBRATE_HARNESS "${why}" CACHE INTERNAL "why fsdpsim-calibrate was not built")
endfunction()

if(NOT FSDPSIM_BUILD_HARNESS)
  fsdpsim_skip_harness("FSDPSIM_BUILD_HARNESS is OFF")
  return()
endif()

find_package(CUDAToolkit QUIET)
find_package(Threads REQUIRED)
if(NOT CUDAToolkit_FOUND)
  fsdpsim_skip_harness("no CUDA toolkit found (set CUDAToolkit_ROOT)")
  return()
endif()
if(NOT TARGET CUDA::cublasLt)
  fsdpsim_skip_harness("the CUDA toolkit at ${CUDAToolkit_LIBRARY_ROOT} has no cuBLASLt")
  return()
endif()

# NCCL: -DNCCL_ROOT, $NCCL_ROOT / $NCCL_HOME, the CUDA toolkit's own folders, the system, or the
# nvidia-nccl wheel PyTorch installs (site-packages/nvidia/nccl/{include,lib}, whose library
# has only the libnccl.so.2 name).
set(_nccl_hints ${NCCL_ROOT} $ENV{NCCL_ROOT} $ENV{NCCL_HOME} ${CUDAToolkit_LIBRARY_ROOT})
find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${_nccl_hints} ${CUDAToolkit_INCLUDE_DIRS} PATH_SUFFIXES include)
find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS ${_nccl_hints} PATH_SUFFIXES lib lib64)
if(NOT NCCL_INCLUDE_DIR OR NOT NCCL_LIBRARY)
  find_program(_fsdpsim_python NAMES python3 python)
  if(_fsdpsim_python)
    execute_process(
      COMMAND ${_fsdpsim_python} -c "import nvidia.nccl as m; print(list(m.__path__)[0])"
      OUTPUT_VARIABLE _nccl_wheel OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE _nccl_rc)
    if(_nccl_rc EQUAL 0 AND _nccl_wheel)
      unset(NCCL_INCLUDE_DIR CACHE)
      unset(NCCL_LIBRARY CACHE)
      find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${_nccl_wheel}/include NO_DEFAULT_PATH)
      find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS ${_nccl_wheel}/lib NO_DEFAULT_PATH)
    endif()
  endif()
endif()
if(NOT NCCL_INCLUDE_DIR OR NOT NCCL_LIBRARY)
  fsdpsim_skip_harness("NCCL not found (nccl.h: ${NCCL_INCLUDE_DIR}, library: ${NCCL_LIBRARY}); set NCCL_ROOT")
  return()
endif()

include(CheckLanguage)
check_language(CUDA)
if(NOT CMAKE_CUDA_COMPILER)
  fsdpsim_skip_harness("no working CUDA compiler (nvcc) for CMake")
  return()
endif()
# A100 (8.0), H100/H200 (9.0), B200 (10.0) as SASS, plus PTX of the newest for later GPUs: of
# those the toolkit knows (nvcc knows compute_90 from CUDA 11.8, compute_100 from 12.8; asking an
# older one for them fails the CUDA check of the whole configure, not just the harness's).
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  if(CUDAToolkit_VERSION VERSION_GREATER_EQUAL 12.8)
    set(CMAKE_CUDA_ARCHITECTURES 80-real 90-real 100)
  elseif(CUDAToolkit_VERSION VERSION_GREATER_EQUAL 11.8)
    set(CMAKE_CUDA_ARCHITECTURES 80-real 90)
  else()
    set(CMAKE_CUDA_ARCHITECTURES 80)
  endif()
endif()
enable_language(CUDA)
set(CMAKE_CUDA_STANDARD 17)  # CMake 3.25 knows no CUDA20 flags for nvcc; kernels.cu needs only C++17
set(CMAKE_CUDA_STANDARD_REQUIRED ON)

add_executable(fsdpsim-calibrate
  harness/main.cpp
  harness/options.cpp
  harness/common.cpp
  harness/util.cpp
  harness/heartbeat.cpp
  harness/job.cpp
  harness/launch_env.cpp
  harness/plan_file.cpp
  harness/collectives.cpp
  harness/gemm.cpp
  harness/memory.cpp
  harness/rank_speed.cpp
  harness/progress.cpp
  harness/results.cpp
  harness/stream_gate.cpp
  harness/launch_timing.cpp
  harness/kernels.cu)
# Includes are rooted at the repository ("calibrate/harness/..."), which is the parent folder.
get_filename_component(_fsdpsim_repo_root "${CMAKE_CURRENT_SOURCE_DIR}/.." ABSOLUTE)
target_include_directories(fsdpsim-calibrate PRIVATE ${_fsdpsim_repo_root})
target_include_directories(fsdpsim-calibrate SYSTEM PRIVATE ${NCCL_INCLUDE_DIR})
target_link_libraries(fsdpsim-calibrate PRIVATE CUDA::cudart CUDA::cublasLt ${NCCL_LIBRARY} Threads::Threads)
target_compile_definitions(fsdpsim-calibrate PRIVATE FSDPSIM_CALIBRATE_VERSION="${fsdpsim_calibrate_version}")
target_compile_options(fsdpsim-calibrate PRIVATE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wconversion>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${FSDPSIM_WERROR}>>:-Werror>
  $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall>)
set_target_properties(fsdpsim-calibrate PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
install(TARGETS fsdpsim-calibrate RUNTIME DESTINATION bin)
set(FSDPSIM_CALIBRATE_HARNESS "built" CACHE INTERNAL "why fsdpsim-calibrate was not built")
message(STATUS "fsdpsim-calibrate (calibration harness): built with NCCL ${NCCL_LIBRARY}, CUDA ${CUDAToolkit_VERSION}")
