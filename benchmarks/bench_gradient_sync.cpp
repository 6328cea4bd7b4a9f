// Issue 11's synchroniser benchmark, run under mpirun (scripts/bench_comm.sh): the time to sum
// BERT-Base-size gradients (the 110 M f32 of BERT-Base's parameter shapes, in DDP's 25 MiB
// buckets) through comms::GradientSynchronizer, against one bare MPI_Allreduce of the same bytes
// in one buffer. The two alternate `--repeats` times in one run; rank 0 prints one JSON line
// with the medians and the throughput ratio bare / synchroniser (1 = no overhead).
//
// Usage: mpirun -np N bench_gradient_sync [--repeats R] [--bucket-mb M] [--scale S]
//   --scale S  multiplies every hidden size by S (default 1; a smaller S for a quick look)
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "comms/communicator.hpp"
#include "comms/gradient_bucket.hpp"
#include "comms/gradient_synchronizer.hpp"
#include "memory/caching_allocator.hpp"
#include "runtime/core/context.hpp"
#include "runtime/config/config.hpp"
#include "runtime/train/model_memory.hpp"
#include "benchmarks/bert_base_gradients.hpp"
#include "benchmarks/median.hpp"

namespace {

using namespace memtrain;
using Clock = std::chrono::steady_clock;
using bench::median;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

}  // namespace

int main(int argc, char** argv) {
  int repeats = 5;
  double bucket_mb = 25.0, scale = 1.0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--repeats") {
      repeats = std::atoi(argv[i + 1]);
    } else if (a == "--bucket-mb") {
      bucket_mb = std::atof(argv[i + 1]);
    } else if (a == "--scale") {
      scale = std::atof(argv[i + 1]);
    } else {
      std::fprintf(stderr,
                   "bench_gradient_sync: unknown argument %s; expected --repeats R, --bucket-mb M or --scale S\n",
                   a.c_str());
      return 2;
    }
  }
  if (repeats < 1 || bucket_mb <= 0 || scale <= 0) {
    std::fprintf(stderr, "bench_gradient_sync: --repeats >= 1, --bucket-mb > 0 and --scale > 0 expected\n");
    return 2;
  }
  auto world = comms::make_world_communicator();
  core::Context ctx(train::make_model_allocator(train::MemoryConfig{}));
  const auto specs = bench::bert_base_gradients(scale);
  auto buckets =
      comms::make_gradient_buckets(ctx, specs, core::DType::f32, static_cast<std::int64_t>(bucket_mb * (1 << 20)));
  std::int64_t n = 0;
  for (const auto& b : buckets) n += b.buffer.numel();
  std::vector<float> flat(static_cast<std::size_t>(n), 1.0f);
  comms::GradientSynchronizer sync(buckets, *world, ctx);

  std::vector<double> bare_s, sync_s;
  for (int r = 0; r < repeats; ++r) {
    world->barrier();
    auto t0 = Clock::now();
    MPI_Allreduce(MPI_IN_PLACE, flat.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    bare_s.push_back(seconds_since(t0));
    world->barrier();
    t0 = Clock::now();
    sync.begin_step();
    for (const auto& s : specs) sync.mark_ready(s.key);
    sync.finish();
    sync_s.push_back(seconds_since(t0));
  }
  // The slowest rank decides a collective's time.
  double medians[2] = {median(bare_s), median(sync_s)};
  world->allreduce_max(medians, 2);
  if (world->rank() == 0) {
    const double bytes = static_cast<double>(n) * 4.0;
    std::printf(
        "{\"ranks\": %d, \"elements\": %lld, \"buckets\": %zu, \"bucket_mb\": %g, \"repeats\": %d, "
        "\"bare_allreduce_s\": %.6f, \"synchronizer_s\": %.6f, \"bare_gb_per_s\": %.4f, "
        "\"synchronizer_gb_per_s\": %.4f, \"ratio\": %.4f}\n",
        world->size(), static_cast<long long>(n), buckets.size(), bucket_mb, repeats, medians[0], medians[1],
        bytes / medians[0] / 1e9, bytes / medians[1] / 1e9, medians[0] / medians[1]);
  }
  return 0;
}
