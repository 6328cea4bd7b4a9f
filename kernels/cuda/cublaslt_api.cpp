#include "kernels/cuda/cublaslt_api.hpp"

#include <dlfcn.h>

#include <string>

#include "memory/cuda_error.hpp"

namespace memtrain::kernels::gpu {
namespace {

#define MEMTRAIN_STRINGIFY2(x) #x
#define MEMTRAIN_STRINGIFY(x) MEMTRAIN_STRINGIFY2(x)
// A constant, not a std::string, so that cublaslt() works even from another static initialiser.
constexpr const char kLibrary[] = "libcublasLt.so." MEMTRAIN_STRINGIFY(CUBLAS_VER_MAJOR);

template <class F>
void find(void* lib, const char* name, F& fn) {
  dlerror();
  void* p = dlsym(lib, name);
  if (p == nullptr) {
    const char* why = dlerror();
    const std::string what = std::string(kLibrary) + " has no " + name + ": " + (why != nullptr ? why : "null symbol");
    dlclose(lib);  // a retry opens it again
    throw memory::CudaError(what);
  }
  fn = reinterpret_cast<F>(p);
}

CublasLtApi open_cublaslt() {
  // Never closed: handles and cached plans may outlive any owner we could give it.
  void* lib = dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = dlerror();
    throw memory::CudaError(std::string("cannot open ") + kLibrary +
                            " (cuBLASLt, for the CUDA GEMMs): " + (why != nullptr ? why : "unknown reason") +
                            "; put the CUDA toolkit's lib directory on LD_LIBRARY_PATH");
  }
  CublasLtApi api{};
  find(lib, "cublasLtCreate", api.Create);
  find(lib, "cublasLtDestroy", api.Destroy);
  find(lib, "cublasLtGetStatusName", api.GetStatusName);
  find(lib, "cublasLtGetStatusString", api.GetStatusString);
  find(lib, "cublasLtMatmul", api.Matmul);
  find(lib, "cublasLtMatmulAlgoGetHeuristic", api.MatmulAlgoGetHeuristic);
  find(lib, "cublasLtMatmulDescCreate", api.MatmulDescCreate);
  find(lib, "cublasLtMatmulDescDestroy", api.MatmulDescDestroy);
  find(lib, "cublasLtMatmulDescSetAttribute", api.MatmulDescSetAttribute);
  find(lib, "cublasLtMatmulPreferenceCreate", api.MatmulPreferenceCreate);
  find(lib, "cublasLtMatmulPreferenceDestroy", api.MatmulPreferenceDestroy);
  find(lib, "cublasLtMatmulPreferenceSetAttribute", api.MatmulPreferenceSetAttribute);
  find(lib, "cublasLtMatrixLayoutCreate", api.MatrixLayoutCreate);
  find(lib, "cublasLtMatrixLayoutDestroy", api.MatrixLayoutDestroy);
  find(lib, "cublasLtMatrixLayoutSetAttribute", api.MatrixLayoutSetAttribute);
  return api;
}

}  // namespace

const CublasLtApi& cublaslt() {
  static const CublasLtApi api = open_cublaslt();  // a throw leaves it unset: the next call retries
  return api;
}

}  // namespace memtrain::kernels::gpu
