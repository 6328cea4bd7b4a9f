#pragma once
// Which verbs may run as several ranks of an MPI launch. Header-only so that the tests can hold
// the rule to made-up launcher environments.
#include <optional>
#include <string>

#include "comms/launcher_environment.hpp"

namespace memtrain::cli {

// Note [Verbs that run as one process]
// Only `train` joins an MPI world as a job of several ranks; every other verb (eval, plan, data,
// replay, checkpoint, export-hf, supervise, and --help or --version without one) is one
// process's work. (eval reads its model on every rank and printed its JSON once per rank; in an
// MPMD launch beside training ranks the two verbs' collectives did not match: MPI_ERR_TRUNCATE
// or a hang.) Started by `mpirun -np N`, each of the N ranks
// used to run the whole verb: N export-hf's writing the same files at once, N data prepare's
// training one tokenizer into one cache, N supervise's each launching its own job. In an MPMD
// launch beside training ranks (`mpirun -n 2 memtrain train ... : -n 1 memtrain export-hf ...`)
// the training ranks waited in MPI_Init for a process that never joins, and the job hung
// after the verb returned 0. So such a verb refuses a launch of more than one rank before it
// does anything: exit 2 on every rank, which makes mpirun end the whole job, with the message
// printed once per program by its first rank. A launch of one rank (mpirun -np 1) runs as
// before, and so does a launch whose size the launcher does not say.

// The message for `verb` (the first argument: a verb, or an option such as --version) started
// as one of several ranks (launcher_world_size above 1), or nothing when it may run: train, or
// a process of one rank or none.
inline std::optional<std::string> multi_rank_refusal(const std::string& verb, const comms::EnvLookup& env) {
  if (verb == "train") return std::nullopt;
  const int size = comms::launcher_world_size(env);
  if (!comms::launched_by_mpi_launcher(env) || size <= 1) return std::nullopt;
  return (verb.empty() ? std::string("memtrain") : "memtrain " + verb) +
         " runs as one process, and this is one of the " + std::to_string(size) +
         " ranks of an MPI launch; expected it without mpirun (only train runs as several ranks)";
}

}  // namespace memtrain::cli
