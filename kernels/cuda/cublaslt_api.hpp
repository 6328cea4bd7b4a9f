#pragma once
// cuBLASLt's entry points, from the library opened on first use (Note [cuBLASLt is opened on
// first use]). kernels/cuda calls cuBLASLt only through cublaslt().
#include <cublasLt.h>

namespace memtrain::kernels::gpu {

// Note [cuBLASLt is opened on first use]
// Linking libcublasLt (541 MB) puts it in every memtrain process, and the dynamic loader's
// relocations alone make about 150 MB of it resident before main() runs: a CPU training run
// grew from 791 to 943 MB of peak RSS once the op API (kernels/ops) referenced the CUDA linear
// layers, on machines where the GPU path never runs, in every MPI rank. So memtrain does not
// link it: the first CUDA GEMM (a CublasLtHandle, in practice) dlopens the library of the major
// version this build was compiled against and looks up the entry points kernels/cuda uses,
// as the driver's are looked up through cudaGetDriverEntryPointByVersion.
struct CublasLtApi {
  decltype(&::cublasLtCreate) Create;
  decltype(&::cublasLtDestroy) Destroy;
  decltype(&::cublasLtGetStatusName) GetStatusName;
  decltype(&::cublasLtGetStatusString) GetStatusString;
  decltype(&::cublasLtMatmul) Matmul;
  decltype(&::cublasLtMatmulAlgoGetHeuristic) MatmulAlgoGetHeuristic;
  decltype(&::cublasLtMatmulDescCreate) MatmulDescCreate;
  decltype(&::cublasLtMatmulDescDestroy) MatmulDescDestroy;
  decltype(&::cublasLtMatmulDescSetAttribute) MatmulDescSetAttribute;
  decltype(&::cublasLtMatmulPreferenceCreate) MatmulPreferenceCreate;
  decltype(&::cublasLtMatmulPreferenceDestroy) MatmulPreferenceDestroy;
  decltype(&::cublasLtMatmulPreferenceSetAttribute) MatmulPreferenceSetAttribute;
  decltype(&::cublasLtMatrixLayoutCreate) MatrixLayoutCreate;
  decltype(&::cublasLtMatrixLayoutDestroy) MatrixLayoutDestroy;
  decltype(&::cublasLtMatrixLayoutSetAttribute) MatrixLayoutSetAttribute;
};

// libcublasLt.so.<CUBLAS_VER_MAJOR>'s entry points, opened on the first call (thread-safe).
// Throws memory::CudaError naming the library or the symbol, with dlerror()'s reason, when it
// cannot be opened; a later call tries again.
const CublasLtApi& cublaslt();

}  // namespace memtrain::kernels::gpu
