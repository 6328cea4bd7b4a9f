#include "runtime/cli/process_environment.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace memtrain::cli {

// Note [OpenBLAS core detection]
// Debian 12's OpenBLAS (0.3.21, DYNAMIC_ARCH) picks its kernels from CPUID when it loads. On
// the virtual machines this project runs on, the CPU reports a generic model ("Intel Xeon
// Processor") and OpenBLAS falls back to its Prescott (SSE3) kernels: sgemm at about 11 GFLOP/s
// on 2 cores instead of about 60 with the AVX-512 (SkylakeX) kernels, measured side by side on
// one machine. OPENBLAS_CORETYPE overrides the detection but is read only at load time, so when
// it is unset we choose from the instruction sets the CPU really has and re-execute ourselves
// once. A user's own OPENBLAS_CORETYPE is always respected.
//
// Note [Passive OpenMP threads]
// Kernels use OpenMP for element-wise loops and OpenBLAS uses its own pthreads for GEMM; with
// libgomp's default spin-waiting, idle OpenMP threads burn the cores OpenBLAS needs (about 18%
// of a BERT step on 2 cores). OMP_WAIT_POLICY=PASSIVE makes them sleep; also read at load time.
void ensure_process_environment(char** argv) {
  bool changed = false;
  if (std::getenv("OPENBLAS_CORETYPE") == nullptr) {
    __builtin_cpu_init();
    const char* core = nullptr;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl")) {
      core = "SkylakeX";
    } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
      core = "Haswell";
    }
    if (core != nullptr) {
      setenv("OPENBLAS_CORETYPE", core, 1);
      changed = true;
    }
  }
  if (std::getenv("OMP_WAIT_POLICY") == nullptr) {
    setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
    changed = true;
  }
  if (!changed) return;
  // Exec the binary's own path, not the /proc/self/exe link: the process would otherwise be
  // named "exe" (ps, pgrep -x memtrain, pidof).
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    self[n] = '\0';
    execv(self, argv);
  }
  execv("/proc/self/exe", argv);
  std::fprintf(stderr, "memtrain: warning: could not re-execute with OPENBLAS_CORETYPE set; "
                       "GEMMs may run on OpenBLAS's generic kernels\n");
}

}  // namespace memtrain::cli
