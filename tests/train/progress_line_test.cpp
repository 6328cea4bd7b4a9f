#include "runtime/train/progress_line.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <string>

#include "runtime/core/errors.hpp"

namespace memtrain::train {
namespace {

TEST(ProgressLine, ShowsStepLossTokensEtaAndMemory) {
  const Progress p{120, 1000, 5.43214, 2345.4, 192.0, 3u << 20};
  EXPECT_EQ(format_progress(p), "step 120/1000 | loss 5.4321 | 2345 tokens/s | ETA 3m12s | mem 3.00 MiB");
}

TEST(ProgressLine, TerminalRewritesOneLineInPlace) {
  std::ostringstream out;
  {
    ProgressLine line(out, /*is_terminal=*/true);
    line.update(Progress{1, 2, 1.0, 1.0, 1.0, 0});
    line.update(Progress{2, 2, 1.0, 1.0, 0.0, 0});
  }
  const std::string s = out.str();
  EXPECT_EQ(s.front(), '\r');
  EXPECT_EQ(std::count(s.begin(), s.end(), '\n'), 1);  // only the final line break
  EXPECT_EQ(std::count(s.begin(), s.end(), '\r'), 2);
}

TEST(ProgressLine, PipeGetsOnePlainLinePerUpdate) {
  std::ostringstream out;
  {
    ProgressLine line(out, /*is_terminal=*/false);
    line.update(Progress{1, 2, 1.0, 1.0, 1.0, 0});
    line.update(Progress{2, 2, 1.0, 1.0, 0.0, 0});
  }
  const std::string s = out.str();
  EXPECT_EQ(std::count(s.begin(), s.end(), '\n'), 2);
  EXPECT_EQ(s.find('\r'), std::string::npos);
  EXPECT_EQ(s.find('\x1b'), std::string::npos);
}

TEST(ProgressLine, DurationsUseHoursMinutesSeconds) {
  EXPECT_EQ(format_duration(45.2), "45s");
  EXPECT_EQ(format_duration(192), "3m12s");
  EXPECT_EQ(format_duration(3723), "1h02m03s");
}

// Note [Progress under mpirun]: the automatic mode rewrites in place only on a terminal that no
// MPI launcher handed out; live and lines are what they say whatever stdout is.
TEST(ProgressMode, AutomaticIsLiveOnlyOnATerminalOutsideMpirun) {
  EXPECT_TRUE(progress_is_live(ProgressMode::automatic, true, false));
  EXPECT_FALSE(progress_is_live(ProgressMode::automatic, true, true));
  EXPECT_FALSE(progress_is_live(ProgressMode::automatic, false, false));
  EXPECT_FALSE(progress_is_live(ProgressMode::automatic, false, true));
  for (const bool tty : {false, true}) {
    for (const bool mpi : {false, true}) {
      EXPECT_TRUE(progress_is_live(ProgressMode::live, tty, mpi));
      EXPECT_FALSE(progress_is_live(ProgressMode::lines, tty, mpi));
    }
  }
}

TEST(ProgressMode, ParsesTheThreeNamesAndRefusesOthers) {
  EXPECT_EQ(parse_progress_mode("auto"), ProgressMode::automatic);
  EXPECT_EQ(parse_progress_mode("live"), ProgressMode::live);
  EXPECT_EQ(parse_progress_mode("lines"), ProgressMode::lines);
  for (const char* bad : {"", "Live", "line", "tty"}) {
    try {
      parse_progress_mode(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("expected auto, live or lines"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace memtrain::train
