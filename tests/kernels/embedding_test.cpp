#include "kernels/cpu/embedding.hpp"

#include <gtest/gtest.h>

#include "tests/kernels/test_util.hpp"

namespace memtrain::kernels {
namespace {
using testing::dot;
using testing::max_relative_error;
using testing::numeric_gradient;
using testing::random_normal;

constexpr int B = 2, T = 4, C = 3, V = 7, P = 6, TV = 2;
// id 5 appears three times: its gradient row must collect all three
const std::vector<std::int32_t> kIds = {5, 1, 5, 0, 6, 5, 2, 3};
const std::vector<std::int32_t> kTypes = {0, 0, 1, 1, 0, 1, 1, 1};

TEST(BertEmbeddingsForward, SumsWordPositionAndTypeRows) {
  const auto word = random_normal(V * C, 1), pos = random_normal(P * C, 2), type = random_normal(TV * C, 3);
  std::vector<double> out(B * T * C);
  bert_embeddings_forward(out.data(), kIds.data(), kTypes.data(), word.data(), pos.data(), type.data(), B, T, C, V, TV);
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t)
      for (int c = 0; c < C; ++c) {
        const int r = b * T + t;
        EXPECT_EQ(out[r * C + c], word[kIds[r] * C + c] + pos[t * C + c] + type[kTypes[r] * C + c]);
      }
}

// Table gradients against central finite differences of L = <embeddings(tables), G>.
TEST(BertEmbeddingsBackward, MatchesFiniteDifferencesWithRepeatedIds) {
  auto word = random_normal(V * C, 4), pos = random_normal(P * C, 5), type = random_normal(TV * C, 6);
  const auto G = random_normal(B * T * C, 7);
  auto loss = [&] {
    std::vector<double> out(B * T * C);
    bert_embeddings_forward(out.data(), kIds.data(), kTypes.data(), word.data(), pos.data(), type.data(), B, T, C, V,
                            TV);
    return dot(out, G);
  };
  std::vector<double> dword(V * C, 0), dpos(P * C, 0), dtype(TV * C, 0);
  bert_embeddings_backward(dword.data(), dpos.data(), dtype.data(), G.data(), kIds.data(), kTypes.data(), B, T, C);
  EXPECT_LT(max_relative_error(dword, numeric_gradient(word, loss)), 1e-6);
  EXPECT_LT(max_relative_error(dpos, numeric_gradient(pos, loss)), 1e-6);
  EXPECT_LT(max_relative_error(dtype, numeric_gradient(type, loss)), 1e-6);
}

TEST(BertEmbeddingsForward, RejectsIdsOutsideTablesNamingThePosition) {
  std::vector<float> word(V * C), pos(P * C), type(TV * C), out(B * T * C, 3.0f);
  auto ids = kIds;
  ids[6] = V;  // b = 1, t = 2
  try {
    bert_embeddings_forward(out.data(), ids.data(), kTypes.data(), word.data(), pos.data(), type.data(), B, T, C, V,
                            TV);
    FAIL() << "expected std::out_of_range";
  } catch (const std::out_of_range& e) {
    EXPECT_NE(std::string(e.what()).find("input_ids[b=1, t=2] = 7"), std::string::npos) << e.what();
  }
  EXPECT_EQ(out, std::vector<float>(B * T * C, 3.0f));  // nothing written
  auto types = kTypes;
  types[0] = -1;
  EXPECT_THROW(bert_embeddings_forward(out.data(), kIds.data(), types.data(), word.data(), pos.data(), type.data(), B,
                                       T, C, V, TV),
               std::out_of_range);
}

}  // namespace
}  // namespace memtrain::kernels
