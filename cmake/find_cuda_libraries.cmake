# The CUDA libraries memtrain uses, as imported targets (issue 14):
#   CUDA::cudart, CUDA::cublasLt   from CMake's FindCUDAToolkit (cuBLASLt for its headers and to know it
#                                  is there: kernels/cuda opens it at run time, Note [cuBLASLt is
#                                  opened on first use])
#   memtrain::cudnn                cuDNN 9 (cudnn.h, libcudnn)
#   memtrain::nccl                 NCCL 2 (nccl.h, libnccl)
# Sets MEMTRAIN_CUDA_LIBRARIES_FOUND, and MEMTRAIN_CUDA_MISSING to what was not found. Searched
# beside the toolkit first (the CUDA 13 toolkit image ships cuDNN and NCCL there), then in the
# system's library folders (Debian's and Ubuntu's packages).
find_package(CUDAToolkit)
set(MEMTRAIN_CUDA_LIBRARIES_FOUND OFF)
set(MEMTRAIN_CUDA_MISSING "")
if(NOT CUDAToolkit_FOUND OR NOT TARGET CUDA::cublasLt)
  set(MEMTRAIN_CUDA_MISSING "the CUDA toolkit's cudart or cuBLASLt was not found")
  return()
endif()

function(memtrain_find_cuda_library target header library)
  find_path(${library}_INCLUDE_DIR ${header} HINTS ${CUDAToolkit_INCLUDE_DIRS})
  find_library(${library}_LIBRARY ${library} HINTS ${CUDAToolkit_LIBRARY_DIR})
  if(${library}_INCLUDE_DIR AND ${library}_LIBRARY)
    add_library(${target} UNKNOWN IMPORTED GLOBAL)
    set_target_properties(${target} PROPERTIES IMPORTED_LOCATION ${${library}_LIBRARY}
                          INTERFACE_INCLUDE_DIRECTORIES ${${library}_INCLUDE_DIR})
  endif()
endfunction()
memtrain_find_cuda_library(memtrain::cudnn cudnn.h cudnn)
memtrain_find_cuda_library(memtrain::nccl nccl.h nccl)
if(NOT TARGET memtrain::cudnn)
  set(MEMTRAIN_CUDA_MISSING "cuDNN (cudnn.h, libcudnn) was not found")
elseif(NOT TARGET memtrain::nccl)
  set(MEMTRAIN_CUDA_MISSING "NCCL (nccl.h, libnccl) was not found")
else()
  set(MEMTRAIN_CUDA_LIBRARIES_FOUND ON)
endif()
# Variables set here are seen by the caller (this file is include()d, not a function).
