// Verbs other than train and eval refuse to run as several ranks (Note [Verbs that run as one
// process]): the rule on made-up launcher environments, then memtrain under a real mpirun,
// including an MPMD launch beside training ranks, which used to hang.
#include "runtime/cli/single_process_verbs.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "tests/cli/run_memtrain.hpp"

namespace memtrain::cli {
namespace {

using testing::contains;
using testing::Scratch;

comms::EnvLookup lookup(const std::map<std::string, std::string>& environment) {
  return [environment](const char* name) -> const char* {
    const auto it = environment.find(name);
    return it == environment.end() ? nullptr : it->second.c_str();
  };
}

const char* kSingleProcessVerbs[] = {"eval",      "plan",      "data",      "replay", "checkpoint",
                                     "export-hf", "supervise", "--version", "--help"};

TEST(SingleProcessVerbs, EveryOtherVerbRefusesSeveralRanks) {
  const auto two = lookup({{"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "1"}});
  for (const char* verb : kSingleProcessVerbs) {
    const auto refusal = multi_rank_refusal(verb, two);
    ASSERT_TRUE(refusal.has_value()) << verb;
    EXPECT_TRUE(contains(*refusal, std::string("memtrain ") + verb + " runs as one process"));
    EXPECT_TRUE(contains(*refusal, "one of the 2 ranks"));
  }
  EXPECT_TRUE(multi_rank_refusal("export-hf", lookup({{"PMI_SIZE", "4"}})).has_value());
}

TEST(SingleProcessVerbs, TrainRunsAsManyRanks) {
  const auto four = lookup({{"OMPI_COMM_WORLD_SIZE", "4"}});
  EXPECT_FALSE(multi_rank_refusal("train", four).has_value());
  EXPECT_EQ(*multi_rank_refusal("", four),
            "memtrain runs as one process, and this is one of the 4 ranks of an MPI launch; "
            "expected it without mpirun (only train runs as several ranks)");
}

TEST(SingleProcessVerbs, OneRankOrNoLauncherRunsAsBefore) {
  for (const char* verb : kSingleProcessVerbs) {
    EXPECT_FALSE(multi_rank_refusal(verb, lookup({})).has_value()) << verb;
    EXPECT_FALSE(multi_rank_refusal(verb, lookup({{"OMPI_COMM_WORLD_SIZE", "1"}})).has_value()) << verb;
    EXPECT_FALSE(multi_rank_refusal(verb, lookup({{"PMIX_RANK", "0"}})).has_value()) << verb;  // size unknown
  }
}

// The launcher's variables set by hand: rank 0 prints the message, rank 1 exits as quietly.
TEST(SingleProcessVerbs, TheBinaryRefusesBeforeDoingAnything) {
  Scratch s;
  const auto r0 = s.memtrain("export-hf no-such-checkpoint --out hf", "OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=0");
  EXPECT_EQ(r0.exit_code, 2) << r0.err;
  EXPECT_TRUE(contains(r0.err, "memtrain: usage error: memtrain export-hf runs as one process"));
  EXPECT_FALSE(contains(r0.err, "no-such-checkpoint"));  // refused before the arguments are looked at
  EXPECT_FALSE(std::filesystem::exists(s.path("hf")));
  const auto r1 = s.memtrain("export-hf no-such-checkpoint --out hf", "OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=1");
  EXPECT_EQ(r1.exit_code, 2);
  EXPECT_EQ(r1.err, "");
}

bool have_mpirun() { return std::system("command -v mpirun >/dev/null 2>&1") == 0; }

TEST(SingleProcessVerbs, UnderMpirunTheJobEndsWithOneMessage) {
  ASSERT_TRUE(have_mpirun()) << "mpirun not found (openmpi-bin, scripts/install_deps.sh)";
  Scratch s;
  const auto r = s.mpirun(2, "plan --config '" + s.write("tiny.yaml", testing::kTinyMockYaml) + "'");
  EXPECT_NE(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.exit_code, 124) << "mpirun hung";
  const std::string line = "memtrain plan runs as one process";
  const auto first = r.err.find(line);
  ASSERT_NE(first, std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(line, first + 1), std::string::npos) << "printed more than once:\n" << r.err;
  EXPECT_FALSE(contains(r.out, "Memory plan"));
}

// `mpirun -n 2 memtrain train ... : -n 1 memtrain checkpoint inspect ...` used to leave the
// training ranks in MPI_Init after the inspect process returned 0: the job hung. Now the whole
// job ends, with the refusal from rank 2, and no step is trained.
TEST(SingleProcessVerbs, AnMpmdLaunchBesideTrainingRanksEnds) {
  ASSERT_TRUE(have_mpirun()) << "mpirun not found (openmpi-bin, scripts/install_deps.sh)";
  Scratch s;
  const std::string binary = std::string(MEMTRAIN_BINARY_DIR) + "/memtrain";
  const std::string root = ::geteuid() == 0 ? " --allow-run-as-root" : "";
  const auto r = s.shell("timeout -k 10 120 mpirun --oversubscribe" + root + " -n 2 '" + binary + "' train --config '" +
                         s.write("tiny.yaml", testing::kTinyMockYaml) + "' --run-dir run : -n 1 '" + binary +
                         "' checkpoint inspect run");
  EXPECT_NE(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.exit_code, 124) << "the job hung:\n" << r.err;
  EXPECT_TRUE(contains(r.err, "memtrain checkpoint runs as one process, and this is one of the 3 ranks"));
  EXPECT_EQ(testing::slurp(s.path("run/metrics.jsonl")).find("tokens_per_s"), std::string::npos);
}

// `mpirun -n 1 memtrain train ... : -n 1 memtrain eval ...` ended in MPI_ERR_TRUNCATE (the two
// verbs' collectives differ), and `... : -n 1 memtrain --version` hung after printing the version:
// both now end the job at once.
TEST(SingleProcessVerbs, EvalAndVersionBesideTrainingRanksEndTheJob) {
  ASSERT_TRUE(have_mpirun()) << "mpirun not found (openmpi-bin, scripts/install_deps.sh)";
  Scratch s;
  const std::string binary = std::string(MEMTRAIN_BINARY_DIR) + "/memtrain";
  const std::string root = ::geteuid() == 0 ? " --allow-run-as-root" : "";
  const std::string config = s.write("tiny.yaml", testing::kTinyMockYaml);
  for (const std::string other : {"eval --checkpoint nowhere", "--version"}) {
    const auto r = s.shell("timeout -k 10 120 mpirun --oversubscribe" + root + " -n 1 '" + binary +
                           "' train --config '" + config + "' --run-dir run : -n 1 '" + binary + "' " + other);
    EXPECT_NE(r.exit_code, 0) << other << ": " << r.err;
    EXPECT_NE(r.exit_code, 124) << other << ": the job hung";
    EXPECT_TRUE(contains(r.err, "runs as one process, and this is one of the 2 ranks")) << other << ": " << r.err;
  }
}

}  // namespace
}  // namespace memtrain::cli
