// The optimizers built in runtime/train are the ones the config layer registers, and a name
// that reaches the builders without passing the config's checks is refused with the list.
#include "runtime/train/optimizer_registry.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/config/component_registry.hpp"
#include "runtime/core/errors.hpp"
#include "runtime/train/make_optimizer.hpp"

namespace memtrain::train {
namespace {

TEST(OptimizerRegistry, BuildsExactlyTheRegisteredOptimizers) {
  std::vector<std::string> built;
  for (const auto& b : optimizer_builders()) {
    built.push_back(b.name);
    EXPECT_TRUE(b.make) << b.name;
  }
  EXPECT_EQ(built, optimizer_names());
}

TEST(OptimizerRegistry, UnknownCompressorIsRefusedWithTheRegisteredNames) {
  Config c;
  EXPECT_FALSE(gradient_compression(c).has_value());
  c.compression.method = "powersgd";
  const auto powersgd = gradient_compression(c);
  ASSERT_TRUE(powersgd.has_value());
  EXPECT_TRUE(powersgd->make);
  EXPECT_EQ(powersgd->start_iter, c.compression.start_iter);
  c.compression.method = "topk";
  try {
    gradient_compression(c);
    ADD_FAILURE() << "topk was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("expected one of none, powersgd, onebit"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace memtrain::train
