// memory.recompute: auto picks the least recomputation whose dry-run peak fits memory.budget
// (issue 5). The references are the dry-run peaks of the candidates themselves, measured one
// by one with the recompute setting written out.
#include <gtest/gtest.h>

#include <sstream>

#include "runtime/core/errors.hpp"
#include "runtime/plan/plan_step.hpp"
#include "runtime/plan/recompute_auto.hpp"
#include "tests/train/tiny_config.hpp"

namespace memtrain::train {
namespace {

Config auto_config(std::size_t budget) {
  Config c = testing::tiny_mock_config();
  c.model.num_hidden_layers = 4;
  c.data.seq_length = 32;
  c.memory.recompute = "auto";
  c.memory.budget = budget;
  return c;
}

std::int64_t peak_with(Config c, const std::string& recompute, const std::string& method, int k) {
  c.memory.recompute = recompute;
  c.memory.recompute_method = method;
  c.memory.recompute_num_layers = k;
  return measure_step(c, 1).stats.reserved_bytes.peak;
}

TEST(RecomputeAuto, CandidatesGoFromNoneToFullOnEveryLayer) {
  const auto c = recompute_candidates(3);
  ASSERT_EQ(c.size(), 5u);
  EXPECT_EQ(c[0].describe(3), "none");
  EXPECT_EQ(c[1].describe(3), "selective");
  EXPECT_EQ(c[2].describe(3), "full on the first 1 of 3 layers");
  EXPECT_EQ(c[3].describe(3), "full on the first 2 of 3 layers");
  EXPECT_EQ(c[4].describe(3), "full on every layer");
}

TEST(RecomputeAuto, HugeBudgetPicksNone) {
  std::ostringstream log;
  const Config r = resolve_recompute(auto_config(std::size_t{1} << 40), 1, log);
  EXPECT_EQ(r.memory.recompute, "none");
  EXPECT_NE(log.str().find("memory.recompute auto: none"), std::string::npos) << log.str();
}

// A budget just below the no-recompute peak must buy some recomputation, and the choice must
// be the first candidate (in Note [Least recomputation first]'s order) whose peak fits.
TEST(RecomputeAuto, TightBudgetPicksTheFirstCandidateThatFits) {
  const Config base = auto_config(0);
  const std::int64_t none = peak_with(base, "none", "uniform", 0);
  const std::int64_t full = peak_with(base, "full", "uniform", 0);
  ASSERT_LT(full, none) << "full recompute must lower the peak of this model";
  std::ostringstream log;
  const Config r = resolve_recompute(auto_config(static_cast<std::size_t>(none - 1)), 1, log);
  EXPECT_NE(r.memory.recompute, "none");
  const std::int64_t chosen =
      peak_with(base, r.memory.recompute, r.memory.recompute_method, r.memory.recompute_num_layers);
  EXPECT_LE(chosen, none - 1);
  for (const auto& c : recompute_candidates(4)) {
    if (c.recompute == r.memory.recompute && c.method == r.memory.recompute_method &&
        c.num_layers == r.memory.recompute_num_layers) {
      break;
    }
    EXPECT_GT(peak_with(base, c.recompute, c.method, c.num_layers), none - 1)
        << c.describe(4) << " fits: it should have been picked";
  }
  EXPECT_NE(log.str().find("budget"), std::string::npos);
}

TEST(RecomputeAuto, NothingFitsIsAConfigErrorWithTheSmallestPeak) {
  std::ostringstream log;
  try {
    resolve_recompute(auto_config(1024), 1, log);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("memory.budget = 1.00 KiB: no recompute setting fits; the smallest dry-run peak is"),
              std::string::npos)
        << what;
  }
}

TEST(RecomputeAuto, OtherSettingsAreLeftAlone) {
  Config c = testing::tiny_mock_config();
  c.memory.recompute = "selective";
  std::ostringstream log;
  EXPECT_EQ(resolve_recompute(c, 1, log).memory.recompute, "selective");
  EXPECT_TRUE(log.str().empty());
}

}  // namespace
}  // namespace memtrain::train
