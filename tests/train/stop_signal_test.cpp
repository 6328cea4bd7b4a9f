#include "runtime/train/stop_signal.hpp"

#include <gtest/gtest.h>

#include <csignal>
#include <thread>

namespace memtrain::train {
namespace {

TEST(StopSignal, SigintFromAnotherThreadIsRecordedNotFatal) {
  StopSignal stop;
  EXPECT_FALSE(stop.requested());
  std::thread([] { std::raise(SIGINT); }).join();
  EXPECT_TRUE(stop.requested());
}

TEST(StopSignal, PreviousHandlerIsRestored) {
  struct sigaction before {};
  sigaction(SIGINT, nullptr, &before);
  { StopSignal stop; }
  struct sigaction after {};
  sigaction(SIGINT, nullptr, &after);
  EXPECT_EQ(before.sa_handler, after.sa_handler);
}

}  // namespace
}  // namespace memtrain::train
