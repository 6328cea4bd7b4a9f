#include "kernels/cpu/matmul_bf16.hpp"

#include <map>
#include <mutex>
#include <stdexcept>
#include <tuple>
#include <unordered_map>

#include <oneapi/dnnl/dnnl.hpp>

namespace memtrain::kernels {

namespace {

using dnnl::memory;

// What makes one primitive: the problem's shape, layouts, output dtype, bias and sum post-op.
using Key = std::tuple<int, int, int, bool, bool, bool, bool, bool>;

struct Primitive {
  memory::desc a, b, c, bias;
  dnnl::matmul matmul;
};

struct Engine {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::mutex mutex;  // guards `made`; executions come from the training thread only
  std::map<Key, Primitive> made;
};

Engine& engine() {
  static Engine e;
  return e;
}

memory::desc matrix(int rows, int cols, memory::data_type dt, bool transposed) {
  // Row-major [rows, cols], or the transpose of a row-major [cols, rows].
  return memory::desc({rows, cols}, dt, transposed ? memory::dims{1, rows} : memory::dims{cols, 1});
}

const Primitive& primitive(const Key& key) {
  auto& e = engine();
  const std::lock_guard<std::mutex> lock(e.mutex);
  auto it = e.made.find(key);
  if (it != e.made.end()) return it->second;
  const auto [M, N, K, trans_a, trans_b, c_bf16, bias, accumulate] = key;
  using dt = memory::data_type;
  Primitive p;
  p.a = matrix(M, K, dt::bf16, trans_a);                                 // [M, K]
  p.b = matrix(K, N, dt::bf16, trans_b);                                 // [K, N]
  p.c = matrix(M, N, c_bf16 ? dt::bf16 : dt::f32, false);                // [M, N]
  if (bias) p.bias = memory::desc({1, N}, dt::f32, memory::dims{N, 1});  // [1, N]
  dnnl::primitive_attr attr;
  if (accumulate) {
    dnnl::post_ops ops;
    ops.append_sum(1.0f);  // C = product + C, in fp32, rounded once
    attr.set_post_ops(ops);
  }
  try {
    const auto desc = bias ? dnnl::matmul::desc(p.a, p.b, p.bias, p.c) : dnnl::matmul::desc(p.a, p.b, p.c);
    p.matmul = dnnl::matmul(dnnl::matmul::primitive_desc(desc, attr, e.engine));
  } catch (const dnnl::error& err) {
    throw std::runtime_error(std::string("oneDNN refused a bf16 matmul: ") + err.what());
  }
  return e.made.emplace(key, std::move(p)).first->second;
}

}  // namespace

bool bf16_gemm_native() {
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  const auto bf16 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
  return (isa & bf16) == bf16;
}

int bf16_flops_per_cycle() {
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  const auto amx = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_amx);
  if ((isa & amx) == amx) return 2048;
  return bf16_gemm_native() ? 128 : 0;
}

std::string bf16_gemm_description() {
  const dnnl_version_t* v = dnnl::version();
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  const char* name = (isa & 0x3e7u) == 0x3e7u ? "avx512_core_amx"
                     : (isa & 0xe7u) == 0xe7u ? "avx512_core_bf16"
                     : (isa & 0x27u) == 0x27u ? "avx512_core"
                     : (isa & 0x7u) == 0x7u   ? "avx2"
                                              : "sse41 or older";
  return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch) + ", " +
         name;
}

void matmul_bf16(void* C, bool c_bf16, const std::uint16_t* A, const std::uint16_t* B, const float* bias, int M, int N,
                 int K, bool trans_a, bool trans_b, bool accumulate) {
  if (M <= 0 || N <= 0 || K <= 0) throw std::invalid_argument("matmul_bf16: sizes must be positive");
  const Primitive& p = primitive(Key{M, N, K, trans_a, trans_b, c_bf16, bias != nullptr, accumulate});
  auto& e = engine();
  // oneDNN's memory objects only wrap the pointers (no copy); const_cast because its API takes
  // void* for inputs too.
  memory a(p.a, e.engine, const_cast<std::uint16_t*>(A));
  memory b(p.b, e.engine, const_cast<std::uint16_t*>(B));
  memory c(p.c, e.engine, C);
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}};
  if (bias != nullptr) args.emplace(DNNL_ARG_BIAS, memory(p.bias, e.engine, const_cast<float*>(bias)));
  p.matmul.execute(e.stream, args);
  e.stream.wait();
}

}  // namespace memtrain::kernels
