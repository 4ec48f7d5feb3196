// Running the real `mactune` binary from a test: a child process in a directory, stdout and
// stderr captured, optionally unprivileged (root ignores permission bits), optionally signalled
// part way (SIGKILL, SIGINT), with a timeout. Shared by the db and tuner CLI tests.
#pragma once

#include <grp.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

namespace mactune::test_cli {

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

struct CliResult {
  int rc = -1;
  bool killed = false;
  std::string out, err;
  int err_lines() const {
    int n = 0;
    for (char c : err) n += c == '\n';
    return n;
  }
};

struct CliOptions {
  bool unprivileged = false;  // drop to nobody when running as root (root ignores modes)
  // Polled every 20 ms while the child runs; returning true sends it `signal` (once).
  std::function<bool()> kill_when;
  int signal = SIGKILL;
  double timeout_s = 120;
  // > 0: no file the child writes may grow past this (RLIMIT_FSIZE, SIGXFSZ ignored): its
  // writes fail as on a full disk. The captured stdout and stderr count too.
  long long file_size_limit = 0;
  // > 0: the child's address space (RLIMIT_AS, `ulimit -v`) and stack size (RLIMIT_STACK,
  // `ulimit -s`: glibc's default size of every thread's stack), in bytes.
  long long address_space_limit = 0;
  long long stack_limit = 0;
  // Stdin of the child (default /dev/null: a command that reads it does not wait on the test).
  std::string stdin_path = "/dev/null";
  // Stdout of the child instead of the captured file (e.g. /dev/full); `out` is then empty.
  std::string stdout_path;
  // With file_size_limit: leave SIGXFSZ at its default, so that the test sees whether mactune
  // itself ignores it (a write past the limit then fails with EFBIG instead of killing it).
  bool sigxfsz_default = false;
  // Set to the child's terminating signal when it died of one (rc is -1 then).
  int* term_signal = nullptr;
};

#ifdef MACTUNE_CLI_BINARY
// Runs `mactune args...` in `dir` (anything with path(): the tests' temporary directories),
// stdout and stderr captured to files there.
template <class Dir>
CliResult run_mactune(const Dir& dir, std::vector<std::string> args, const CliOptions& o = {}) {
  static int serial = 0;
  const std::string tag = std::to_string(getpid()) + "-" + std::to_string(++serial);
  const std::string out = dir.path() + "/stdout-" + tag, err = dir.path() + "/stderr-" + tag;
  const pid_t pid = fork();
  if (pid == 0) {
    if (chdir(dir.path().c_str()) != 0) _exit(119);
    const std::string out_to = o.stdout_path.empty() ? out : o.stdout_path;
    if (!freopen(out_to.c_str(), "w", stdout) || !freopen(err.c_str(), "w", stderr) ||
        !freopen(o.stdin_path.c_str(), "r", stdin))
      _exit(120);
    if (o.file_size_limit > 0) {
      const rlimit lim{static_cast<rlim_t>(o.file_size_limit),
                       static_cast<rlim_t>(o.file_size_limit)};
      if (setrlimit(RLIMIT_FSIZE, &lim) != 0) _exit(123);
      if (!o.sigxfsz_default) signal(SIGXFSZ, SIG_IGN);  // stays ignored across exec
    }
    if (o.stack_limit > 0) {
      const rlimit lim{static_cast<rlim_t>(o.stack_limit), static_cast<rlim_t>(o.stack_limit)};
      if (setrlimit(RLIMIT_STACK, &lim) != 0) _exit(124);
    }
    if (o.address_space_limit > 0) {
      const rlimit lim{static_cast<rlim_t>(o.address_space_limit),
                       static_cast<rlim_t>(o.address_space_limit)};
      if (setrlimit(RLIMIT_AS, &lim) != 0) _exit(125);
    }
    if (o.unprivileged && geteuid() == 0 &&
        (setgroups(0, nullptr) != 0 || setgid(65534) != 0 || setuid(65534) != 0))
      _exit(121);
    args.insert(args.begin(), MACTUNE_CLI_BINARY);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(MACTUNE_CLI_BINARY, argv.data());
    _exit(122);
  }
  CliResult r;
  int status = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    const pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (elapsed > o.timeout_s) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      break;
    }
    if (!r.killed && o.kill_when && o.kill_when()) {
      kill(pid, o.signal);
      r.killed = true;
      if (o.signal == SIGKILL) {
        waitpid(pid, &status, 0);
        break;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (o.term_signal != nullptr) *o.term_signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  r.out = o.stdout_path.empty() ? read_file(out) : std::string();
  r.err = read_file(err);
  return r;
}

#endif  // MACTUNE_CLI_BINARY

}  // namespace mactune::test_cli
