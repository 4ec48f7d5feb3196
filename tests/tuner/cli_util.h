// Helpers for tests that run the real `mactune` binary: a temporary directory, a child process
// with captured output (optionally unprivileged, optionally killed part way), tiny specs.
#pragma once

#include <grp.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace mactune::tuner::testing {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "mactune-tuner-XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
    chmod(path_.c_str(), 0777);  // an unprivileged child writes here too
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  void write(const std::string& name, const std::string& text) const {
    std::ofstream(file(name), std::ios::binary) << text;
    chmod(file(name).c_str(), 0644);
  }

 private:
  std::string path_;
};

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

#ifdef MACTUNE_CLI_BINARY
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
};

inline CliResult run_mactune(const TempDir& dir, std::vector<std::string> args,
                             const CliOptions& o = {}) {
  static int serial = 0;
  const std::string tag = std::to_string(getpid()) + "-" + std::to_string(++serial);
  const std::string out = dir.file("stdout-" + tag), err = dir.file("stderr-" + tag);
  const pid_t pid = fork();
  if (pid == 0) {
    if (chdir(dir.path().c_str()) != 0) _exit(119);
    if (!freopen(out.c_str(), "w", stdout) || !freopen(err.c_str(), "w", stderr)) _exit(120);
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
  r.out = read_file(out);
  r.err = read_file(err);
  return r;
}

#endif  // MACTUNE_CLI_BINARY

// A spec whose points take milliseconds: a small layer, short contexts, few samples.
inline std::string tiny_spec(const std::string& name, const std::string& batches = "[1, 2]",
                             const std::string& contexts = "[256, 512]",
                             const std::string& hits = "[0, 1]",
                             const std::string& chunks = "[64, 128]", int samples = 3,
                             const std::string& interleave = "point") {
  std::ostringstream s;
  s << "name: " << name << "\n"
    << "device: {backend: cpu}\n"
    << "kernels:\n  cpu: {chunk_tokens: " << chunks << ", threads: 1}\n"
    << "mac: {K: 64, r: 32}\n"
    << "workload:\n"
    << "  batch: " << batches << "\n"
    << "  context: " << contexts << "\n"
    << "  q_heads: 8\n  kv_heads: 2\n  head_dim: 64\n  dtype: bf16\n"
    << "  hit_rate: " << hits << "\n"
    << "  lag: uniform(1,16)\n"
    << "constraints: [r < context]\n"
    << "measure: {warmup: 1, min_samples: " << samples << ", max_samples: " << samples
    << ", noise: 0.5, time_cap: 1, mode: hot, interleave: " << interleave << "}\n"
    << "output: {db: " << name << ".db, dispatch: " << name << ".json, report: rep-" << name
    << "}\n";
  return s.str();
}

}  // namespace mactune::tuner::testing
