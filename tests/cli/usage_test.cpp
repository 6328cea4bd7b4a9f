// The program's surface: --version, --help, and usage errors (exit 2, one message, no abort).
#include <gtest/gtest.h>

#include <regex>

#include "tests/cli/run_memtrain.hpp"

namespace memtrain::cli {
namespace {

using testing::contains;
using testing::Scratch;

TEST(Usage, VersionPrintsNameAndSemanticVersion) {
  Scratch s;
  const auto r = s.memtrain("--version");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_TRUE(std::regex_match(r.out, std::regex("memtrain [0-9]+\\.[0-9]+\\.[0-9]+\n"))) << r.out;
}

TEST(Usage, HelpListsEveryVerb) {
  Scratch s;
  const auto r = s.memtrain("--help");
  EXPECT_EQ(r.exit_code, 0);
  for (const char* verb : {"train", "data", "replay"}) EXPECT_TRUE(contains(r.out, verb));
}

TEST(Usage, TrainHelpListsItsOptions) {
  Scratch s;
  const auto r = s.memtrain("train --help");
  EXPECT_EQ(r.exit_code, 0);
  for (const char* option : {"--config", "--set", "--run-dir"}) EXPECT_TRUE(contains(r.out, option));
}

TEST(Usage, NoVerbIsAUsageError) {
  Scratch s;
  const auto r = s.memtrain("");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err,
                       "memtrain: usage error: no verb; expected train, plan, data, replay, checkpoint, "
                       "eval, export-hf or supervise"))
      << r.err;
}

TEST(Usage, UnknownVerbIsNamed) {
  Scratch s;
  const auto r = s.memtrain("trian --config x.yaml");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "memtrain: usage error: unknown verb 'trian'; expected train, plan, data, replay, checkpoint, eval, "
            "export-hf or supervise (see memtrain --help)\n");
}

TEST(Usage, UnknownDataSubcommandIsNamed) {
  Scratch s;
  const auto r = s.memtrain("data frob --config x.yaml");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "memtrain: usage error: unknown data subcommand 'frob'; expected prepare (see memtrain data --help)\n");
}

TEST(Usage, TrainWithoutConfigIsAUsageError) {
  Scratch s;
  const auto r = s.memtrain("train");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "memtrain: usage error: --config is required"));
}

TEST(Usage, UnknownOptionIsAUsageError) {
  Scratch s;
  const auto r = s.memtrain("train --config x.yaml --learning-rate 3");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "memtrain: usage error: "));
  EXPECT_TRUE(contains(r.err, "--learning-rate"));
}

// supervise takes a command after --: an unknown option before it is named (CLI11 had listed
// the command's words, reversed, as unexpected), as is an option whose value is missing.
TEST(Usage, UnknownSuperviseOptionIsNamedNotTheCommand) {
  Scratch s;
  auto r = s.memtrain("supervise --bogus 1 -- mpirun -np 1 memtrain train --config c.yaml --run-dir d");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err,
                       "memtrain: usage error: unknown option --bogus of memtrain supervise; expected --help, "
                       "--max-restarts, --backoff, --min-ranks, --exclude-host"))
      << r.err;
  EXPECT_FALSE(contains(r.err, "mpirun")) << r.err;
  r = s.memtrain("supervise --exclude-host -- mpirun -np 1 memtrain train --config c.yaml --run-dir d");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "memtrain: usage error: --exclude-host needs a value before --")) << r.err;
  r = s.memtrain("train --config x.yaml --frob=2");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "memtrain: usage error: unknown option --frob of memtrain train; expected ")) << r.err;
}

TEST(Usage, DataWithoutPrepareIsAUsageError) {
  Scratch s;
  const auto r = s.memtrain("data --config x.yaml");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "memtrain: usage error: "));
}

TEST(Usage, SetWithoutValueIsAUsageError) {
  Scratch s;
  const auto r = s.memtrain("train --config x.yaml --set");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "memtrain: usage error: "));
}

// An empty option value is refused by name, whatever the option: `eval --input ""` used to
// score the validation split and exit 0, `--non-allocator ""` to plan with the default, and
// supervise's `--max-restarts ""` / `--backoff=` to run with theirs.
TEST(Usage, AnEmptyOptionValueIsAUsageError) {
  Scratch s;
  const std::string config = s.write("tiny.yaml", testing::kTinyMockYaml);
  const struct {
    std::string args, option;
  } cases[] = {
      {"eval --checkpoint ckpt --input ''", "--input"},
      {"eval --checkpoint= --input x.json", "--checkpoint"},
      {"plan --config " + config + " --target a100-40gb --non-allocator ''", "--non-allocator"},
      {"train --config " + config + " --dry-run --non-allocator=", "--non-allocator"},
      {"supervise --max-restarts '' -- true", "--max-restarts"},
      {"supervise --backoff= -- true", "--backoff"},
      {"replay --trace t.csv --policy best_fit --capacity ''", "--capacity"},
      {"data prepare --config ''", "--config"},  // a sub-verb's options too
      {"data prepare --config " + config + " --set=", "--set"},
  };
  for (const auto& c : cases) {
    const auto r = s.memtrain(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.out << r.err;
    EXPECT_TRUE(contains(r.err, "memtrain: usage error: " + c.option + ": empty; expected a value")) << c.args;
    EXPECT_EQ(r.out, "") << c.args;
  }
}

// A sub-verb's unknown option is named with the sub-verb's options, as a verb's is.
TEST(Usage, UnknownSubVerbOptionIsNamed) {
  Scratch s;
  const auto r = s.memtrain("data prepare --config x.yaml --cache-dir c");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err,
                       "memtrain: usage error: unknown option --cache-dir of memtrain data prepare; expected "
                       "--help, --config, --set (see memtrain data prepare --help)"))
      << r.err;
}

// CLI11's counting words ("At Most 1 required but received 2", "Could not convert") are said as
// what was wrong and what was expected (runtime/cli/usage_error_text).
TEST(Usage, ParseErrorsSayWhatWasWrongAndWhatWasExpected) {
  Scratch s;
  const struct {
    const char* args;
    const char* message;
  } cases[] = {
      {"train --config x.yaml --progress=lines --progress=live", "--progress is given 2 times; expected it once"},
      {"train --config x.yaml --progress", "--progress needs a value; expected --progress auto|live|lines"},
      {"supervise --max-restarts abc -- true --run-dir x",
       "--max-restarts = abc: not a number of the option's type, or out of its range; expected a value as "
       "`memtrain supervise --help` describes"},
      {"supervise --min-ranks 0 -- true --run-dir x",
       "--min-ranks = 0: out of range; expected an integer in [1, 1048576]"},
      {"supervise", "memtrain supervise needs the job to run after --; expected `memtrain supervise [options] -- "},
      {"data", "memtrain data needs a sub-verb (see memtrain data --help)"},
      {"checkpoint verify a b",
       "unexpected argument b; expected only the arguments `memtrain checkpoint --help` lists"},
      {"checkpoint verify a b c", "unexpected arguments b c; expected only the arguments"},  // CLI11 lists "c b"
      {"replay --trace t.csv --policy best_fit --capacity 1GiB extra",
       "unexpected argument extra; expected only the arguments `memtrain replay --help` lists"},
  };
  for (const auto& c : cases) {
    const auto r = s.memtrain(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args;
    EXPECT_TRUE(contains(r.err, std::string("memtrain: usage error: ") + c.message)) << c.args << ": " << r.err;
  }
}

}  // namespace
}  // namespace memtrain::cli
