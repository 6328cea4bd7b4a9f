// memtrain top: the jobs on one shared ledger, live (design.md, "Many jobs on one pool").
#include <httplib.h>
#include <poll.h>
#include <signal.h>
#include <termios.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <iostream>
#include <memory>
#include <string>
#include <thread>

#include "memory/pool_view.hpp"
#include "memory/shared_ledger.hpp"
#include "runtime/cli/commands.hpp"
#include "runtime/core/errors.hpp"

namespace memtrain::cli {
namespace {

struct TopArgs {
  std::string ledger = "cpu";
  bool once = false;
  bool json = false;
  std::string serve;
  double interval = 1.0;
};

std::atomic<bool> g_stop{false};
httplib::Server* g_server = nullptr;

extern "C" void on_top_stop_signal(int) {
  g_stop = true;
  if (g_server != nullptr) g_server->stop();  // only sets a flag and shuts the listening socket
}

std::string host_name() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) return "?";
  return host;
}

std::unique_ptr<memory::SharedLedger> open_ledger(const std::string& name) {
  try {
    return memory::SharedLedger::open_existing(name);
  } catch (const std::invalid_argument& e) {
    throw RuntimeError(std::string("memtrain top: ") + e.what());
  } catch (const std::runtime_error& e) {
    throw RuntimeError(std::string("memtrain top --ledger ") + name + ": " + e.what());
  }
}

// "HOST:PORT" with PORT in [0, 65535] (0: any free port). Throws ConfigError naming --serve.
std::pair<std::string, int> parse_address(const std::string& text) {
  const auto colon = text.rfind(':');
  const auto bad = [&](const std::string& why) {
    return ConfigError("--serve " + text + ": " + why + "; expected HOST:PORT such as 127.0.0.1:9400 (port 0 = any)");
  };
  if (colon == std::string::npos || colon == 0) throw bad("no host");
  const std::string port_text = text.substr(colon + 1);
  if (port_text.empty() || port_text.size() > 5 || port_text.find_first_not_of("0123456789") != std::string::npos) {
    throw bad("the port is not a number");
  }
  const int port = std::stoi(port_text);
  if (port > 65535) throw bad("the port is above 65535");
  std::string host = text.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  return {host, port};
}

void serve(memory::SharedLedger& ledger, const TopArgs& args) {
  const auto [host, port] = parse_address(args.serve);
  httplib::Server server;
  const std::string me = host_name();
  server.Get("/metrics", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(memory::pool_prometheus(args.ledger, me, ledger.snapshot()), "text/plain; version=0.0.4");
  });
  server.Get("/", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(memory::pool_json(args.ledger, me, ledger.snapshot()).dump(2) + "\n", "application/json");
  });
  int bound = port;
  if (port == 0) {
    bound = server.bind_to_any_port(host);
  } else if (!server.bind_to_port(host, port)) {
    bound = -1;
  }
  if (bound < 0) {
    throw ConfigError("--serve " + args.serve + ": cannot listen there (the port is taken, or " + host +
                      " is not an address of this host); expected a free HOST:PORT, or port 0 for any free one");
  }
  g_server = &server;
  std::signal(SIGINT, on_top_stop_signal);
  std::signal(SIGTERM, on_top_stop_signal);
  std::cout << "memtrain top: serving ledger " << args.ledger << " at http://" << host << ":" << bound << "/metrics"
            << std::endl;
  server.listen_after_bind();
  g_server = nullptr;
}

// Live view: redraws every interval until q, SIGINT or SIGTERM. On a terminal, keys are read
// without waiting for Enter, and the terminal's settings are restored on the way out.
void live(memory::SharedLedger& ledger, const TopArgs& args) {
  std::signal(SIGINT, on_top_stop_signal);
  std::signal(SIGTERM, on_top_stop_signal);
  const bool tty = ::isatty(STDIN_FILENO) != 0;
  termios saved{};
  if (tty && ::tcgetattr(STDIN_FILENO, &saved) == 0) {
    termios raw = saved;
    raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);
    ::tcsetattr(STDIN_FILENO, TCSANOW, &raw);
  }
  const std::string me = host_name();
  while (!g_stop) {
    // Home and clear, then the table: the view refreshes in place as top does.
    std::cout << "\033[H\033[2J" << memory::pool_table(args.ledger, me, ledger.snapshot())
              << "\n(q or Ctrl-C quits; refreshes every " << args.interval << " s)" << std::flush;
    pollfd in{STDIN_FILENO, POLLIN, 0};
    const int wait_ms = static_cast<int>(args.interval * 1000);
    if (::poll(&in, 1, wait_ms) > 0 && (in.revents & POLLIN) != 0) {
      char c = 0;
      if (::read(STDIN_FILENO, &c, 1) <= 0) {
        // stdin closed (not a terminal): keep refreshing on the clock alone.
        std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
      } else if (c == 'q' || c == 'Q') {
        break;
      }
    }
  }
  if (tty) ::tcsetattr(STDIN_FILENO, TCSANOW, &saved);
  std::cout << "\n";
}

}  // namespace

void add_top_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<TopArgs>();
  CLI::App* cmd = app.add_subcommand("top", "Show the jobs on a shared memory ledger, live");
  cmd->add_option("--ledger", args->ledger,
                  "The ledger (memory.ledger of the jobs, or a GPU's gpu-<uuid>; default cpu)");
  cmd->add_flag("--once", args->once, "Print one table (or, with --json, one JSON document) and exit");
  cmd->add_flag("--json", args->json, "Print one JSON document and exit");
  cmd->add_option("--serve", args->serve, "Serve Prometheus text at http://HOST:PORT/metrics (port 0: any free)");
  cmd->add_option("--interval", args->interval, "Seconds between refreshes of the live view (default 1)");
  cmd->callback([args, &exit_code] {
    if (!(args->interval >= 0.05 && args->interval <= 3600)) {
      throw ConfigError("--interval " + std::to_string(args->interval) + ": expected seconds in [0.05, 3600]");
    }
    if (!args->serve.empty() && (args->once || args->json)) {
      throw ConfigError("--serve runs until stopped; expected it without --once and --json");
    }
    if (!args->serve.empty()) parse_address(args->serve);  // bad input before the ledger is looked up
    // A GPU's ledger is "<memory.ledger>-gpu-<uuid>" (gpu_ledger_name): 64 + 41 characters at most.
    if (!memory::SharedLedger::valid_name(args->ledger, 64 + 41)) {
      throw ConfigError("--ledger " + args->ledger +
                        ": is not a ledger name; expected 1 to 105 characters from [A-Za-z0-9._-]: a job's "
                        "memory.ledger, or a GPU's ledger (gpu-<uuid>, or <memory.ledger>-gpu-<uuid>)");
    }
    auto ledger = open_ledger(args->ledger);
    const std::string me = host_name();
    if (!args->serve.empty()) {
      serve(*ledger, *args);
    } else if (args->json) {
      std::cout << memory::pool_json(args->ledger, me, ledger->snapshot()).dump(2) << "\n";
    } else if (args->once) {
      std::cout << memory::pool_table(args->ledger, me, ledger->snapshot());
    } else {
      live(*ledger, *args);
    }
    exit_code = 0;
  });
}

}  // namespace memtrain::cli
