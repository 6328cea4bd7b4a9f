// Issue 12's compression benchmark, run under mpirun (scripts/bench_compression.sh): one
// data-parallel gradient sum of BERT-Base-size gradients (110 M f32, DDP's 25 MiB buckets)
// through comms::GradientSynchronizer per method: none, PowerSGD rank 1, 4 and 16, 1-bit (blocks
// of 256 by the mean magnitude, the default, and one rms scale per chunk). Each
// rank's gradients are normal draws (the compressors' work does not depend on the values, but
// zeros would make PowerSGD's factors degenerate). The methods alternate `--repeats` times in
// one run; per method rank 0 prints one JSON line with the medians (the slowest rank's) of the
// whole sum and of the time inside collectives, their difference (compression and
// decompression), the payload bytes per rank and the ratio to the uncompressed payload.
//
// Usage: mpirun -np N bench_compression [--repeats R] [--scale S]
//   --scale S  multiplies every hidden size by S (default 1; a smaller S for a quick look)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "benchmarks/bert_base_gradients.hpp"
#include "benchmarks/median.hpp"
#include "comms/communicator.hpp"
#include "comms/counting_communicator.hpp"
#include "comms/gradient_bucket.hpp"
#include "comms/gradient_synchronizer.hpp"
#include "comms/onebit_compressor.hpp"
#include "comms/powersgd_compressor.hpp"
#include "runtime/core/context.hpp"
#include "runtime/config/config.hpp"
#include "runtime/train/model_memory.hpp"

namespace {

using namespace memtrain;
using Clock = std::chrono::steady_clock;
using bench::median;

struct Method {
  std::string name;
  std::optional<comms::GradientSynchronizer::Compression> compression;
  std::vector<double> total_s, collective_s;
  std::int64_t bytes = 0, uncompressed = 0;
};

}  // namespace

int main(int argc, char** argv) {
  int repeats = 5;
  double scale = 1.0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--repeats") {
      repeats = std::atoi(argv[i + 1]);
    } else if (a == "--scale") {
      scale = std::atof(argv[i + 1]);
    } else {
      std::fprintf(stderr, "bench_compression: unknown argument %s; expected --repeats R or --scale S\n", a.c_str());
      return 2;
    }
  }
  if (repeats < 1 || scale <= 0) {
    std::fprintf(stderr, "bench_compression: --repeats >= 1 and --scale > 0 expected\n");
    return 2;
  }
  auto world = comms::make_world_communicator();
  comms::CountingCommunicator counted(*world);
  core::Context ctx(train::make_model_allocator(train::MemoryConfig{}));
  const auto specs = bench::bert_base_gradients(scale);

  std::vector<Method> methods;
  methods.push_back({"none", std::nullopt, {}, {}});
  for (int r : {1, 4, 16}) {
    comms::GradientSynchronizer::Compression c;
    c.make = comms::powersgd_factory(comms::PowerSgdOptions{.rank = r});
    c.start_iter = 0;
    methods.push_back({"powersgd_r" + std::to_string(r), c, {}, {}});
  }
  comms::GradientSynchronizer::Compression onebit;
  onebit.make = comms::onebit_factory(comms::OneBitOptions{});
  onebit.start_iter = 0;
  methods.push_back({"onebit", onebit, {}, {}});
  // One rms scale per chunk: DeepSpeed's form, 1/64 bit per element fewer than blocks of 256.
  onebit.make = comms::onebit_factory(comms::OneBitOptions{0, comms::OneBitScale::rms});
  methods.push_back({"onebit_chunk_rms", onebit, {}, {}});

  // One bucket set and synchroniser per method (each compressor keeps its own state), summed
  // on the calling thread (overlap off) so that the time is the sum's alone.
  std::vector<std::vector<comms::GradientBucket>> buckets;
  std::vector<std::unique_ptr<comms::GradientSynchronizer>> syncs;
  buckets.reserve(methods.size());
  for (const auto& m : methods) {
    buckets.push_back(comms::make_gradient_buckets(ctx, specs, core::DType::f32, std::int64_t{25} << 20));
    syncs.push_back(std::make_unique<comms::GradientSynchronizer>(buckets.back(), counted, ctx, /*overlap=*/false,
                                                                  comms::GradientReduction::all_reduce,
                                                                  m.compression ? &*m.compression : nullptr));
  }
  std::mt19937 gen(static_cast<unsigned>(17 + world->rank()));
  std::normal_distribution<float> normal(0.0f, 1e-3f);
  for (int r = 0; r < repeats; ++r) {
    for (std::size_t k = 0; k < methods.size(); ++k) {
      for (auto& b : buckets[k]) {
        float* g = b.buffer.data<float>();
        for (std::int64_t i = 0; i < b.buffer.numel(); ++i) g[i] = normal(gen);
      }
      world->barrier();
      const double before = counted.counts().seconds;
      const auto t0 = Clock::now();
      syncs[k]->begin_step(r);
      for (const auto& s : specs) syncs[k]->mark_ready(s.key);
      syncs[k]->finish();
      methods[k].total_s.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
      methods[k].collective_s.push_back(counted.counts().seconds - before);
      methods[k].bytes = syncs[k]->step_stats().bytes;
      methods[k].uncompressed = syncs[k]->step_stats().uncompressed_bytes;
    }
  }
  std::int64_t elements = 0;
  for (const auto& b : buckets[0]) elements += b.buffer.numel();
  const double none_s = [&] {
    double t = median(methods[0].total_s);
    world->allreduce_max(&t, 1);
    return t;
  }();
  for (auto& m : methods) {
    // The slowest rank decides a collective's time.
    double medians[2] = {median(m.total_s), median(m.collective_s)};
    world->allreduce_max(medians, 2);
    if (world->rank() == 0) {
      std::printf(
          "{\"method\": \"%s\", \"ranks\": %d, \"elements\": %lld, \"repeats\": %d, \"sync_s\": %.6f, "
          "\"collective_s\": %.6f, \"compress_s\": %.6f, \"bytes\": %lld, \"uncompressed_bytes\": %lld, "
          "\"byte_ratio\": %.3f, \"speedup\": %.4f}\n",
          m.name.c_str(), world->size(), static_cast<long long>(elements), repeats, medians[0], medians[1],
          std::max(0.0, medians[0] - medians[1]), static_cast<long long>(m.bytes),
          static_cast<long long>(m.uncompressed), static_cast<double>(m.uncompressed) / static_cast<double>(m.bytes),
          none_s / medians[0]);
    }
  }
  return 0;
}
