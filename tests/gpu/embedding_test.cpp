// kernels::gpu::bert_embeddings_forward / backward against the CPU twin
// (kernels/cpu/embedding.hpp) in double precision, with repeated ids, and the bad-id error.
#include "kernels/cuda/embedding.hpp"

#include "kernels/cpu/embedding.hpp"
#include "tests/gpu/gpu_test_util.hpp"
#include "tests/kernels/test_util.hpp"

namespace memtrain::gpu_testing {
namespace {

template <class T>
class EmbeddingTest : public GpuTest {};
using StorageTypes = ::testing::Types<float, __nv_bfloat16, __half>;
TYPED_TEST_SUITE(EmbeddingTest, StorageTypes);

TYPED_TEST(EmbeddingTest, ForwardAndBackwardMatchTheCpuTwin) {
  using T = TypeParam;
  using kernels::testing::random_normal;
  unsigned seed = 61;
  for (auto [B, T_, C, V] : {std::tuple{4, 128, 768, 30522}, std::tuple{3, 7, 33, 5}, std::tuple{1, 1, 1, 1}}) {
    const int TV = 2, P = T_ + 3;
    const std::size_t n = std::size_t(B) * T_ * C;
    const auto word = rounded<T>(random_normal<float>(std::size_t(V) * C, seed++));
    const auto pos = rounded<T>(random_normal<float>(std::size_t(P) * C, seed++));
    const auto type = rounded<T>(random_normal<float>(std::size_t(TV) * C, seed++));
    std::mt19937 gen(seed++);
    std::vector<std::int32_t> ids(std::size_t(B) * T_), type_ids(ids.size());
    // Few distinct ids, so rows repeat (the [MASK] token does in real batches).
    for (auto& id : ids) id = static_cast<std::int32_t>(gen() % std::min(V, 17));
    for (auto& t : type_ids) t = static_cast<std::int32_t>(gen() % TV);
    const auto wd = widen(word), pd = widen(pos), td = widen(type);
    std::vector<double> out_ref(n);
    kernels::bert_embeddings_forward(out_ref.data(), ids.data(), type_ids.data(), wd.data(), pd.data(), td.data(), B,
                                     T_, C, V, TV);
    DeviceBuffer<T> gword(to_storage<T>(word)), gpos(to_storage<T>(pos)), gtype(to_storage<T>(type)), gout(n);
    DeviceBuffer<std::int32_t> gids(ids), gtypes(type_ids);
    gout.poison();
    kernels::gpu::bert_embeddings_forward<T>(this->ctx, gout.get(), gids.get(), gtypes.get(), gword.get(), gpos.get(),
                                             gtype.get(), B, T_, C, V, TV);
    const std::string where = std::string(type_name<T>()) + " B=" + std::to_string(B) + " T=" + std::to_string(T_) +
                              " C=" + std::to_string(C);
    EXPECT_TRUE(close(to_floats(gout.download()), out_ref, tolerance<T>())) << "out, " << where;

    if constexpr (std::is_same_v<T, float>) {
      const auto dout = random_normal<float>(n, seed++);
      const auto dw0 = random_normal<float>(std::size_t(V) * C, seed++),
                 dp0 = random_normal<float>(std::size_t(P) * C, seed++),
                 dt0 = random_normal<float>(std::size_t(TV) * C, seed++);
      std::vector<double> dw_ref = widen(dw0), dp_ref = widen(dp0), dt_ref = widen(dt0);
      const auto doutd = widen(dout);
      kernels::bert_embeddings_backward(dw_ref.data(), dp_ref.data(), dt_ref.data(), doutd.data(), ids.data(),
                                        type_ids.data(), B, T_, C);
      DeviceBuffer<float> gdout(dout), gdw(dw0), gdp(dp0), gdt(dt0);
      kernels::gpu::bert_embeddings_backward(this->ctx, gdw.get(), gdp.get(), gdt.get(), gdout.get(), gids.get(),
                                             gtypes.get(), B, T_, C);
      EXPECT_TRUE(close(gdw.download(), dw_ref, 1e-5)) << "dword, " << where;
      EXPECT_TRUE(close(gdp.download(), dp_ref, 1e-5)) << "dpos, " << where;
      EXPECT_TRUE(close(gdt.download(), dt_ref, 1e-5)) << "dtype, " << where;
    }
  }
}

TYPED_TEST(EmbeddingTest, AnIdOutsideTheVocabularyIsNamedAndNothingIsWritten) {
  using T = TypeParam;
  const int B = 2, T_ = 3, C = 4, V = 10;
  DeviceBuffer<T> word(to_storage<T>(std::vector<float>(V * C, 1.0f))),
      pos(to_storage<T>(std::vector<float>(T_ * C, 1.0f)));
  DeviceBuffer<T> type(to_storage<T>(std::vector<float>(C, 1.0f))), out(B * T_ * C);
  out.poison();
  DeviceBuffer<std::int32_t> ids(std::vector<std::int32_t>{1, 2, 3, 4, 10, 11});
  try {
    kernels::gpu::bert_embeddings_forward<T>(this->ctx, out.get(), ids.get(), nullptr, word.get(), pos.get(),
                                             type.get(), B, T_, C, V, 1);
    FAIL() << "id 10 with V = 10 was accepted";
  } catch (const std::out_of_range& e) {
    EXPECT_NE(std::string(e.what()).find("input_ids[b=1, t=1] = 10"), std::string::npos) << e.what();
  }
  for (float x : to_floats(out.download())) ASSERT_TRUE(std::isnan(x)) << "out was written";
}

}  // namespace
}  // namespace memtrain::gpu_testing
