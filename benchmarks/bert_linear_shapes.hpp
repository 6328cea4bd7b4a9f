#pragma once
// The Linear shapes of a bench-bert step (configs/bench-bert.yaml: hidden 768, FFN 3072, 1024
// tokens a micro-batch, about 150 masked positions for the tied decoder over 30522 words), as
// Google Benchmark arguments {N, C, OC, threads} of out [N, OC] = inp [N, C] W [OC, C]^T.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

namespace memtrain::bench {

// QKV and attention output, FFN up, FFN down, the tied decoder; 2 threads, milliseconds.
inline void bert_linear_shapes(benchmark::internal::Benchmark* b) {
  for (const auto& s : std::vector<std::vector<std::int64_t>>{
           {1024, 768, 768, 2}, {1024, 768, 3072, 2}, {1024, 3072, 768, 2}, {150, 768, 30522, 2}}) {
    b->Args(s);
  }
  b->ArgNames({"N", "C", "OC", "threads"})->Unit(benchmark::kMillisecond)->UseRealTime();
}

}  // namespace memtrain::bench
