#pragma once
// Compute threads of the CPU kernels: OpenMP (elementwise and per-(b, h) loops) and OpenBLAS
// (GEMMs) are set together so several ranks on one node never oversubscribe the cores.

namespace memtrain::kernels {

// Sets OpenMP's thread count (omp_set_num_threads) and OpenBLAS's (openblas_set_num_threads)
// to n. Call from the main thread, outside kernels. Throws std::invalid_argument if n < 1.
void set_num_threads(int n);

// The thread count the kernels use: the last set_num_threads value, else
// omp_get_max_threads() as it was at the first call.
int num_threads();

// Note [OpenBLAS inside OpenMP loops]
// Per-(b, h) attention runs many small GEMMs inside an OpenMP loop. The pthread build of
// OpenBLAS (Debian's default libopenblas0-pthread) does not notice it is called from an OpenMP
// thread and would start its own threads for each of them: 2 x 2 threads fighting for 2 cores.
// While such a loop runs, OpenBLAS is therefore set to one thread, and the loop itself uses
// num_threads() OpenMP threads. Scopes nest (a kernel calls another); the outermost restores
// num_threads() for OpenBLAS on destruction. Open and close them on the main thread only.
class SerialBlasScope {
 public:
  SerialBlasScope();
  ~SerialBlasScope();
  SerialBlasScope(const SerialBlasScope&) = delete;
  SerialBlasScope& operator=(const SerialBlasScope&) = delete;

 private:
  int saved_;  // num_threads() on entry (read before OpenBLAS may change OpenMP's default)
};

}  // namespace memtrain::kernels
