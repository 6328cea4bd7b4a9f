#include "runtime/cli/supervisor.hpp"

#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "runtime/checkpoint/checkpoint_store.hpp"
#include "runtime/checkpoint/checkpoint_trust.hpp"
#include "runtime/cli/mpirun_hosts.hpp"
#include "runtime/config/component_registry.hpp"
#include "runtime/config/config_loader.hpp"
#include "runtime/core/errors.hpp"

extern char** environ;

namespace memtrain::cli {
namespace {

std::atomic<pid_t> g_child{0};
std::atomic<int> g_forwarded{0};

// Note [SIGTERM reaches the job as SIGUSR1]
// A scheduler ends a job with SIGTERM. Sent on to mpirun, SIGTERM is Open MPI's teardown: the
// ranks get SIGTERM, their output stops being forwarded, they are killed a second later whatever
// they are doing (a checkpoint half-written), and mpirun exits 1 while they may still be
// running. SIGUSR1 is the signal mpirun forwards to the ranks and then waits for: memtrain
// stops after the step in progress, writes its checkpoint (checkpoint.interval > 0) and exits
// 138 (README, "Exit codes"). So the supervisor forwards SIGTERM as SIGUSR1, waits for the job,
// and exits 143 as a process ended by SIGTERM after a clean stop would. SIGINT and SIGUSR1 are
// forwarded as they are.
int forwarded_as(int sig) { return sig == SIGTERM ? SIGUSR1 : sig; }

void forward(int sig) {
  g_forwarded.store(sig);
  const pid_t child = g_child.load();
  if (child > 0) ::kill(child, forwarded_as(sig));  // mpirun forwards it to every rank
}

// Installs `forward` for the stop signals while alive, restoring the previous handlers after.
class ForwardStopSignals {
 public:
  ForwardStopSignals() {
    struct sigaction sa {};
    sa.sa_handler = forward;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < 3; ++i) ::sigaction(kSignals[i], &sa, &old_[i]);
  }
  ~ForwardStopSignals() {
    for (int i = 0; i < 3; ++i) ::sigaction(kSignals[i], &old_[i], nullptr);
  }

 private:
  static constexpr int kSignals[3] = {SIGINT, SIGTERM, SIGUSR1};
  struct sigaction old_[3];
};

std::string describe_exit(int code) {
  if (code > 128 && code < 128 + 65) {
    const char* name = ::strsignal(code - 128);
    return "exit " + std::to_string(code) + " (" + (name ? name : "signal") + ")";
  }
  return "exit " + std::to_string(code);
}

std::string join(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

// Note [The supervisor returns when the job is gone]
// mpirun may exit while a rank is still alive (its teardown after a signal: the rank was seen a
// second later, re-parented to init), and a scheduler that sees the supervisor exit then starts
// the next job beside it. The supervisor is therefore a child subreaper
// (prctl(PR_SET_CHILD_SUBREAPER)): the job's orphans are re-parented to it instead of init, and
// after mpirun exits it reaps every descendant before it returns or relaunches. One that is
// still there kLingerSeconds later is killed (SIGKILL), as mpirun's own teardown would have.
constexpr double kLingerSeconds = 30.0;

// The processes whose parent is this one (from /proc/<pid>/stat's fourth field).
std::vector<pid_t> own_children() {
  std::vector<pid_t> out;
  const pid_t self = ::getpid();
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(e.path() / "stat");
    std::string line;
    if (!std::getline(in, line)) continue;
    const auto close = line.rfind(')');  // the command name may hold spaces and parentheses
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 1));
    char state = 0;
    long ppid = 0;
    if (rest >> state >> ppid && ppid == self) out.push_back(static_cast<pid_t>(std::stol(name)));
  }
  return out;
}

// Reaps every remaining descendant (re-parented here: Note [The supervisor returns when the job
// is gone]); SIGKILLs those left after kLingerSeconds.
void reap_descendants() {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(kLingerSeconds);
  bool killed = false;
  for (;;) {
    int status = 0;
    const pid_t p = ::waitpid(-1, &status, WNOHANG);
    if (p > 0) continue;
    if (p < 0 && errno == EINTR) continue;
    if (p < 0) return;  // ECHILD: none left
    if (!killed && std::chrono::steady_clock::now() > deadline) {
      for (const pid_t c : own_children()) ::kill(c, SIGKILL);
      killed = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// Runs argv in its own process group (so that a Ctrl-C reaches it only through `forward`, once)
// and returns its exit code, 128 + signal when a signal killed it.
int run_once(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid = 0;
  const int rc = ::posix_spawnp(&pid, args[0], nullptr, &attr, args.data(), environ);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) throw RuntimeError("memtrain supervise: cannot start " + argv[0] + ": " + std::strerror(rc));
  g_child.store(pid);
  // A signal that arrived before the child existed is forwarded now.
  if (const int sig = g_forwarded.load()) ::kill(pid, forwarded_as(sig));
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw RuntimeError(std::string("memtrain supervise: waitpid: ") + std::strerror(errno));
  }
  g_child.store(0);
  reap_descendants();
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

bool restartable(int code) { return code != 0 && code != 2 && code != 130 && code != 138 && code != 143; }

}  // namespace

std::string run_dir_of(const std::vector<std::string>& command) {
  for (std::size_t i = 0; i < command.size(); ++i) {
    if (command[i] == "--run-dir" && i + 1 < command.size()) return command[i + 1];
    if (command[i].rfind("--run-dir=", 0) == 0) return command[i].substr(10);
  }
  return "";
}

int ranks_of(const std::vector<std::string>& command) {
  for (std::size_t i = 0; i + 1 < command.size(); ++i) {
    if (command[i] == "-np" || command[i] == "-n" || command[i] == "--np") {
      try {
        return std::stoi(command[i + 1]);
      } catch (const std::exception&) {
        return 0;
      }
    }
  }
  return 0;
}

std::vector<std::string> relaunch_command(const std::vector<std::string>& command, const std::string& resume_mode,
                                          int min_ranks) {
  std::vector<std::string> out;
  bool resume_set = false, ranks_set = min_ranks <= 0;
  for (std::size_t i = 0; i < command.size(); ++i) {
    const std::string& a = command[i];
    if (a == "--resume" && i + 1 < command.size()) {
      out.push_back(a);
      out.push_back(resume_mode);
      ++i;
      resume_set = true;
    } else if (a.rfind("--resume=", 0) == 0) {
      out.push_back("--resume=" + resume_mode);
      resume_set = true;
    } else if (!ranks_set && (a == "-np" || a == "-n" || a == "--np") && i + 1 < command.size()) {
      out.push_back(a);
      out.push_back(std::to_string(min_ranks));
      ++i;
      ranks_set = true;
    } else {
      out.push_back(a);
    }
  }
  if (!ranks_set) {
    throw ConfigError("memtrain supervise --min-ranks " + std::to_string(min_ranks) +
                      ": the command has no -np N to replace (expected an mpirun command line)");
  }
  if (!resume_set) {
    out.push_back("--resume");
    out.push_back(resume_mode);
  }
  return out;
}

// Note [A relaunch onto fewer ranks must be able to start]
// --min-ranks relaunches onto fewer ranks, and a config whose world rules that rank count
// breaks (the tensor-parallel size does not divide it, the global batch does not split over
// its data-parallel ranks, or per-rank compression state that resumes only on the checkpoint's
// data-parallel size) would show it only after the first failure, as a relaunch that exits 2,
// ending a job the supervisor was there to keep going. The command's config (its --config and
// --set arguments, read as `train` reads them) is therefore checked against min_ranks at start.
void check_relaunch_world(const std::vector<std::string>& command, int min_ranks) {
  std::string config_path;
  std::vector<std::string> overrides;
  for (std::size_t i = 0; i < command.size(); ++i) {
    const std::string& a = command[i];
    if ((a == "--config" || a == "--set") && i + 1 < command.size()) {
      (a == "--config" ? config_path : overrides.emplace_back()) = command[++i];
    } else if (a.rfind("--config=", 0) == 0) {
      config_path = a.substr(9);
    } else if (a.rfind("--set=", 0) == 0) {
      overrides.push_back(a.substr(6));
    }
  }
  if (config_path.empty()) return;  // not a train command that can be read: it fails its own way
  const train::Config config = train::load_config(config_path, overrides);
  const std::string prefix = "memtrain supervise --min-ranks " + std::to_string(min_ranks) + ": a relaunch onto " +
                             std::to_string(min_ranks) + (min_ranks == 1 ? " rank" : " ranks") + " could not start: ";
  try {
    train::check_tensor_parallel_world(config, min_ranks);
    train::check_data_parallel_size(config, min_ranks / config.parallel.tensor_model_parallel_size);
  } catch (const ConfigError& e) {
    throw ConfigError(prefix + e.what());
  }
  if (train::keeps_per_rank_state(config)) {
    throw ConfigError(prefix + "the job's gradient compression (compression.method = " + config.compression.method +
                      ", training.optimizer = " + config.training.optimizer +
                      ") keeps per-rank state that resumes only on the checkpoint's data-parallel size; "
                      "expected no --min-ranks for such a job");
  }
}

int supervise(const SupervisorOptions& options, std::ostream& log) {
  if (options.command.empty()) {
    throw ConfigError("memtrain supervise: no command; expected `memtrain supervise [options] -- COMMAND...`");
  }
  const std::string run_dir = run_dir_of(options.command);
  if (run_dir.empty()) {
    throw ConfigError(
        "memtrain supervise: the command names no --run-dir; a relaunch resumes the run "
        "directory, so the command must name it (--run-dir D)");
  }
  if (options.max_restarts < 0) throw ConfigError("memtrain supervise --max-restarts must be >= 0");
  if (!(options.backoff_s >= 0 && options.backoff_s <= kMaxBackoffSeconds)) {  // NaN fails both
    char shown[32];
    std::snprintf(shown, sizeof shown, "%g", options.backoff_s);
    throw ConfigError(std::string("memtrain supervise --backoff ") + shown + ": expected a number of seconds in [0, " +
                      std::to_string(static_cast<int>(kMaxBackoffSeconds)) + "]");
  }
  relaunch_command(options.command, "required", options.min_ranks);  // refuse a bad --min-ranks now
  // --min-ranks moves a relaunch onto fewer ranks; more than launched would only show after
  // the first failure, as a relaunch that cannot start.
  if (const int launched = ranks_of(options.command);
      options.min_ranks > 0 && launched > 0 && options.min_ranks > launched) {
    throw ConfigError("memtrain supervise --min-ranks " + std::to_string(options.min_ranks) + ": more than the " +
                      std::to_string(launched) + " ranks the command launches (-np " + std::to_string(launched) +
                      "); expected at most " + std::to_string(launched));
  }
  if (const int launched = ranks_of(options.command); options.min_ranks > 0 && options.min_ranks < launched) {
    check_relaunch_world(options.command, options.min_ranks);
  }
  // Relaunches start from `base` with `ranks` processes (0: as launched).
  std::vector<std::string> base = options.command;
  int ranks = options.min_ranks;
  std::string hostfile_copy;
  if (!options.exclude_hosts.empty()) {
    // Checked now, written only at a relaunch (Note [Leaving a host out of a relaunch]).
    const HostExclusion check = exclude_hosts(options.command, options.exclude_hosts, "");
    hostfile_copy = std::filesystem::path(run_dir).lexically_normal().string();
    while (hostfile_copy.size() > 1 && hostfile_copy.back() == '/') hostfile_copy.pop_back();
    hostfile_copy += ".hostfile";
    const int launched = ranks_of(options.command);
    if (ranks <= 0 && check.slots_left > 0 && launched > check.slots_left) ranks = check.slots_left;
  }

  ForwardStopSignals signals;
  g_forwarded.store(0);
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);  // Note [The supervisor returns when the job is gone]
  std::vector<std::string> command = options.command;
  double backoff = options.backoff_s;
  for (int attempt = 0;; ++attempt) {
    const int code = run_once(command);
    if (const int sig = g_forwarded.load()) {
      log << "memtrain supervise: stopped by " << ::strsignal(sig)
          << (sig == SIGTERM ? " (forwarded to the job as SIGUSR1: Note [SIGTERM reaches the job as SIGUSR1]): "
                             : " (forwarded to the job): ")
          << describe_exit(code) << ", not restarted\n";
      // The job's clean stop on the forwarded SIGUSR1 is the clean stop SIGTERM asked for. A
      // Ctrl-C is 130 whatever mpirun made of it (it exits 1 when its ranks stopped on SIGINT),
      // so that a scheduler tells a user's interrupt from a crash, as with one rank.
      if (sig == SIGINT) return 128 + SIGINT;
      return sig == SIGTERM && code == 128 + SIGUSR1 ? 128 + SIGTERM : code;
    }
    if (!restartable(code)) {
      if (code != 0)
        log << "memtrain supervise: " << describe_exit(code)
            << " is not restarted (Note [Which exits the supervisor restarts])\n";
      return code;
    }
    if (attempt >= options.max_restarts) {
      log << "memtrain supervise: " << describe_exit(code) << "; giving up after " << options.max_restarts << " restart"
          << (options.max_restarts == 1 ? "" : "s") << "\n";
      return code;
    }
    std::error_code ec;
    const std::string root = (std::filesystem::path(run_dir) / "checkpoints").string();
    // Only a trusted checkpoint is resumed (Note [A checkpoint is trusted once a health check has
    // passed]): with none, the relaunch starts over instead of requiring one.
    bool has_checkpoint = false;
    if (std::filesystem::is_directory(root, ec)) {
      for (const auto& c : checkpoint::list_checkpoints(root))
        has_checkpoint = has_checkpoint || checkpoint::read_trust(c.path).trusted;
    }
    if (!options.exclude_hosts.empty())
      base = exclude_hosts(options.command, options.exclude_hosts, hostfile_copy).command;
    command = relaunch_command(base, has_checkpoint ? "required" : "auto", ranks);
    log << "memtrain supervise: " << describe_exit(code) << "; restart " << attempt + 1 << " of "
        << options.max_restarts << " in " << backoff << " s: " << join(command) << "\n"
        << std::flush;
    // The backoff is cut short by a stop signal: nothing runs, so the supervisor ends as that
    // signal asks (128 + signal), without a relaunch.
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(backoff);
    while (g_forwarded.load() == 0 && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (const int sig = g_forwarded.load()) {
      log << "memtrain supervise: stopped by " << ::strsignal(sig) << " during the backoff after "
          << describe_exit(code) << ", not restarted\n";
      return 128 + sig;
    }
    backoff = std::min(backoff * 2, kMaxBackoffSeconds);
    ::setenv("MEMTRAIN_FAULT", "", 1);
  }
}

}  // namespace memtrain::cli
