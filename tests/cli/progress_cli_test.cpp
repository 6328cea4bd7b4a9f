// `memtrain train --progress` (Note [Progress under mpirun]): a log written through mpirun
// holds plain progress lines although every rank's stdout is a pseudo-terminal; `live` forces
// the in-place line into a file, `lines` keeps a terminal's output plain.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "tests/cli/run_memtrain.hpp"

namespace memtrain::cli {
namespace {

using testing::contains;
using testing::kTinyMockYaml;
using testing::Scratch;

long count(const std::string& s, char c) { return std::count(s.begin(), s.end(), c); }

TEST(ProgressCli, MpirunIntoAFileGetsPlainLines) {
  Scratch s;
  const auto r = s.mpirun(1, "train --config " + s.write("c.yaml", kTinyMockYaml) + " --run-dir run");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "step 2/2 | loss ")) << r.out;
  EXPECT_EQ(count(r.out, '\r'), 0) << r.out;
  EXPECT_EQ(count(r.out, '\x1b'), 0) << r.out;
}

TEST(ProgressCli, LiveRewritesInPlaceEvenInAFile) {
  Scratch s;
  const auto r = s.memtrain("train --config " + s.write("c.yaml", kTinyMockYaml) + " --run-dir run --progress live");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "\rstep 2/2 | loss ")) << r.out;
  EXPECT_TRUE(contains(r.out, "\x1b[K")) << r.out;
}

TEST(ProgressCli, AnUnknownModeIsAUsageError) {
  Scratch s;
  const auto r = s.memtrain("train --config " + s.write("c.yaml", kTinyMockYaml) + " --run-dir run --progress bar");
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_TRUE(contains(r.err, "--progress bar: expected auto, live or lines")) << r.err;
  EXPECT_FALSE(std::filesystem::exists(s.path("run"))) << "a refused run left its directory";
}

}  // namespace
}  // namespace memtrain::cli
