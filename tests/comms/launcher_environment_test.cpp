// What a launcher's environment says (comms/launcher_environment.hpp), on made-up environments
// of Open MPI's mpirun, MPICH's hydra and PMIx launchers; nothing is read from this process's own.
#include "comms/launcher_environment.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace memtrain::comms {
namespace {

using Environment = std::map<std::string, std::string>;

EnvLookup lookup(const Environment& environment) {
  return [environment](const char* name) -> const char* {
    const auto it = environment.find(name);
    return it == environment.end() ? nullptr : it->second.c_str();
  };
}

TEST(LauncherEnvironment, AnyLauncherVariableMarksALaunch) {
  EXPECT_FALSE(launched_by_mpi_launcher(lookup({})));
  EXPECT_FALSE(launched_by_mpi_launcher(lookup({{"OMP_NUM_THREADS", "2"}, {"OMPI_MCA_btl", "self"}})));
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "PMI_RANK"}) {
    EXPECT_TRUE(launched_by_mpi_launcher(lookup({{name, "0"}}))) << name;
  }
}

TEST(LauncherEnvironment, WorldSizeFromOpenMpiThenPmi) {
  EXPECT_EQ(launcher_world_size(lookup({})), 0);
  EXPECT_EQ(launcher_world_size(lookup({{"OMPI_COMM_WORLD_SIZE", "4"}})), 4);
  EXPECT_EQ(launcher_world_size(lookup({{"PMI_SIZE", "3"}})), 3);
  EXPECT_EQ(launcher_world_size(lookup({{"OMPI_COMM_WORLD_SIZE", "2"}, {"PMI_SIZE", "8"}})), 2);
  EXPECT_EQ(launcher_world_size(lookup({{"PMIX_RANK", "1"}})), 0);  // PMIx alone says no size
}

TEST(LauncherEnvironment, AWorldSizeThatIsNotAPositiveNumberIsUnknown) {
  for (const char* v : {"", "many", "2x", "0", "-3", "99999999999"}) {
    EXPECT_EQ(launcher_world_size(lookup({{"OMPI_COMM_WORLD_SIZE", v}})), 0) << v;
  }
}

TEST(LauncherEnvironment, RankFromTheFirstVariableSet) {
  EXPECT_EQ(launcher_rank(lookup({})), 0);
  EXPECT_EQ(launcher_rank(lookup({{"OMPI_COMM_WORLD_RANK", "3"}, {"PMIX_RANK", "3"}})), 3);
  EXPECT_EQ(launcher_rank(lookup({{"PMI_RANK", "5"}})), 5);
  EXPECT_EQ(launcher_rank(lookup({{"OMPI_COMM_WORLD_RANK", ""}, {"PMIX_RANK", "2"}})), 2);
}

// What Open MPI 4.1 sets for `mpirun -n 1 a : -n 2 b : -n 1 c` (OMPI_APP_CTX_NUM_PROCS "1 2 1"):
// the programs start at ranks 0, 1 and 3.
TEST(LauncherEnvironment, FirstRankOfEachProgramOfAnMpmdLaunch) {
  for (int rank = 0; rank < 4; ++rank) {
    const bool first = first_rank_of_its_program(
        lookup({{"OMPI_COMM_WORLD_RANK", std::to_string(rank)}, {"OMPI_APP_CTX_NUM_PROCS", "1 2 1"}}));
    EXPECT_EQ(first, rank == 0 || rank == 1 || rank == 3) << rank;
  }
}

TEST(LauncherEnvironment, WithoutProgramSizesOnlyRankZeroIsFirst) {
  EXPECT_TRUE(first_rank_of_its_program(lookup({})));
  EXPECT_TRUE(first_rank_of_its_program(lookup({{"PMI_RANK", "0"}, {"PMI_SIZE", "2"}})));
  EXPECT_FALSE(first_rank_of_its_program(lookup({{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}})));
  EXPECT_FALSE(first_rank_of_its_program(lookup({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_APP_CTX_NUM_PROCS", "x"}})));
}

}  // namespace
}  // namespace memtrain::comms
