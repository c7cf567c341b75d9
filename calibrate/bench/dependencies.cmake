# Decides whether clustersim-bench (CUDA/cuBLAS/NCCL microbenchmarks) can be built here.
# Included from calibrate/CMakeLists.txt after the top level has run check_language(CUDA) and
# find_package(CUDAToolkit QUIET). Sets CLUSTERSIM_BENCH_MISSING to the reason it cannot be built
# (empty when everything is found) and, when NCCL is found, the imported target clustersim_nccl.
# NCCL is searched in $NCCL_HOME, the CUDA toolkit and the standard paths; set
# CLUSTERSIM_NCCL_INCLUDE_DIR / CLUSTERSIM_NCCL_LIBRARY to point elsewhere.
set(CLUSTERSIM_BENCH_MISSING "")
if(NOT CUDAToolkit_FOUND)
  set(CLUSTERSIM_BENCH_MISSING "the CUDA toolkit was not found")
elseif(NOT CMAKE_CUDA_COMPILER)
  set(CLUSTERSIM_BENCH_MISSING "no CUDA compiler (nvcc) was found")
elseif(NOT TARGET CUDA::cublas OR NOT TARGET CUDA::cudart)
  set(CLUSTERSIM_BENCH_MISSING "cuBLAS or the CUDA runtime library was not found")
else()
  find_path(CLUSTERSIM_NCCL_INCLUDE_DIR nccl.h
    HINTS ENV NCCL_HOME ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda
    PATH_SUFFIXES include)
  find_library(CLUSTERSIM_NCCL_LIBRARY nccl
    HINTS ENV NCCL_HOME ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda
    PATH_SUFFIXES lib64 lib lib/x86_64-linux-gnu)
  if(NOT CLUSTERSIM_NCCL_INCLUDE_DIR OR NOT CLUSTERSIM_NCCL_LIBRARY)
    set(CLUSTERSIM_BENCH_MISSING
        "NCCL was not found (nccl.h: ${CLUSTERSIM_NCCL_INCLUDE_DIR}, libnccl: ${CLUSTERSIM_NCCL_LIBRARY}; set NCCL_HOME)")
  elseif(NOT TARGET clustersim_nccl)
    add_library(clustersim_nccl UNKNOWN IMPORTED)
    set_target_properties(clustersim_nccl PROPERTIES
      IMPORTED_LOCATION "${CLUSTERSIM_NCCL_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${CLUSTERSIM_NCCL_INCLUDE_DIR}")
  endif()
endif()
