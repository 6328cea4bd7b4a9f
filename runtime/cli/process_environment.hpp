#pragma once

namespace memtrain::cli {

// Makes sure OpenBLAS and OpenMP start with the settings memtrain needs, re-executing the
// process once when they are missing (they are read when the libraries load, before main).
// Returns normally when nothing had to change; otherwise does not return (execv), or returns
// after printing a warning if re-executing failed (the run goes on, only slower).
void ensure_process_environment(char** argv);

}  // namespace memtrain::cli
