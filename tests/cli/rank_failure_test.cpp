// One rank's failure ends the whole job (Note [One rank's failure ends the job]): an mpirun
// job of two ranks whose rank 1 runs out of memory while rank 0 goes on to wait in the step's
// all-reduce exits non-zero within seconds, after rank 1's message, instead of hanging.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/cli/run_memtrain.hpp"

namespace memtrain::cli {
namespace {

using testing::contains;
using testing::Scratch;
using testing::slurp;

const char* kYaml =
    "model:\n"
    "  vocab_size: 100\n"
    "  hidden_size: 32\n"
    "  num_attention_heads: 2\n"
    "  num_hidden_layers: 1\n"
    "  intermediate_size: 64\n"
    "  max_position_embeddings: 16\n"
    "data:\n"
    "  mock: true\n"
    "  seq_length: 16\n"
    "training:\n"
    "  micro_batch_size: 2\n"
    "  global_batch_size: 4\n"
    "  max_steps: 2\n"
    "  eval_interval: 1000\n"
    "  eval_steps: 1\n";

bool have_mpirun() { return std::system("command -v mpirun >/dev/null 2>&1") == 0; }

// `command` run by /bin/sh in the scratch directory, its output captured.
testing::Run run_shell(const Scratch& s, const std::string& command) {
  const std::string full =
      "cd '" + s.path("") + "' && " + command + " >'" + s.path(".stdout") + "' 2>'" + s.path(".stderr") + "'";
  const int status = std::system(full.c_str());
  testing::Run run;
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.out = slurp(s.path(".stdout"));
  run.err = slurp(s.path(".stderr"));
  return run;
}

TEST(RankFailure, OutOfMemoryOnOneRankEndsTheJobNonZeroWithoutHanging) {
  ASSERT_TRUE(have_mpirun()) << "mpirun not found (openmpi-bin, scripts/install_deps.sh)";
  Scratch s;
  s.write("exp.yaml", kYaml);
  const std::string binary = std::string(MEMTRAIN_BINARY_DIR) + "/memtrain";
  const std::string common = "train --config exp.yaml --dry-run --non-allocator 0 ";
  // Open MPI's MPMD form: rank 0 gets a device that holds the run, rank 1 one that cannot hold
  // even the model (an out-of-memory on rank 1 alone). `timeout` bounds a regression (a hang)
  // to 60 s, reported as exit 124.
  const std::string mpirun = "timeout -s KILL 60 mpirun --oversubscribe --allow-run-as-root ";
  const std::string args = "-np 1 '" + binary + "' " + common + "--target 1GiB --run-dir run0 : " + "-np 1 '" + binary +
                           "' " + common + "--target 1KiB --run-dir run1";
  const auto r = run_shell(s, mpirun + args);
  EXPECT_NE(r.exit_code, 0) << r.err;
  EXPECT_NE(r.exit_code, 124) << "the job hung until timeout killed it";
  EXPECT_NE(r.exit_code, 137) << "the job hung until timeout killed it";
  EXPECT_TRUE(contains(r.err, "out of memory")) << r.err;
}

}  // namespace
}  // namespace memtrain::cli
