#include "runtime/cli/process_environment.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "runtime/cli/omp_wait_policy.hpp"

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
// Note [When OpenMP threads may spin]
// libgomp's workers spin for a while (GOMP_SPINCOUNT) after each parallel region before they
// sleep; with OMP_WAIT_POLICY=PASSIVE they sleep at once and the next region waits for a
// futex wake-up. memtrain once forced PASSIVE everywhere, when OpenBLAS threaded its GEMMs with
// its own pthreads and spinning OpenMP workers took the cores those needed (about 18% of a BERT
// step on 2 cores). Since the GEMMs run on the OpenMP team or on the calling thread, never on
// OpenBLAS's pool (Note [One thread pool: GEMMs split over OpenMP], kernels/cpu/matmul.cpp), and
// oneDNN runs on the same libgomp team, there is one pool, and a step is a chain of short
// regions (a 16-bit conversion of a [1024, 768] activation takes about 50 us, about what a
// wake-up costs). Measured side by side (configs/bench-bert.yaml, one process on 2 cores, 3
// alternating rounds, 2026-12-04): libgomp's default spin ran fp32 2% faster, fp16 5% and
// bf16 4% than PASSIVE, with OpenBLAS's Haswell and SkylakeX kernels alike. So a single process
// keeps libgomp's default. A job of several ranks starts PASSIVE, as before: ranks sharing a
// node compete for its cores, and even one rank per node has the gradient synchroniser's
// communication thread (parallel.overlap_grad_reduce) beside its compute threads, which
// spinning workers would starve; we have not measured spinning there. A user's own
// OMP_WAIT_POLICY is always respected (runtime/cli/omp_wait_policy.hpp has the rule).
void ensure_process_environment(char** argv) {
  bool changed = false;
  if (std::getenv("OPENBLAS_CORETYPE") == nullptr) {
    __builtin_cpu_init();
    const char* core = nullptr;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl")) {
      core = "SkylakeX";
    } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
      core = "Haswell";
    }
    if (core != nullptr) {
      setenv("OPENBLAS_CORETYPE", core, 1);
      changed = true;
    }
  }
  const char* wait_policy = default_omp_wait_policy([](const char* name) { return std::getenv(name); });
  if (wait_policy != nullptr) {
    setenv("OMP_WAIT_POLICY", wait_policy, 1);
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
  std::fprintf(stderr,
               "memtrain: warning: could not re-execute with the settings memtrain makes "
               "(OPENBLAS_CORETYPE, OMP_WAIT_POLICY); GEMMs may run on OpenBLAS's generic "
               "kernels, and idle OpenMP threads may spin beside other ranks\n");
}

}  // namespace memtrain::cli
