// Helpers for tests that run the real `mactune` binary: a temporary directory, tiny specs, and
// the child-process runner of tests/cli_process.h.
#pragma once

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/cli_process.h"

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

using test_cli::CliOptions;
using test_cli::CliResult;
using test_cli::read_file;
#ifdef MACTUNE_CLI_BINARY
using test_cli::run_mactune;
#endif

// A spec whose points take milliseconds: a small layer, short contexts, few samples.
inline std::string tiny_spec(const std::string& name, const std::string& batches = "[1, 2]",
                             const std::string& contexts = "[256, 512]",
                             const std::string& hits = "[0, 1]",
                             const std::string& chunks = "[64, 128]", int samples = 3,
                             const std::string& interleave = "point",
                             const std::string& break_even = "grid") {
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
    << "decide: {break_even: " << break_even << "}\n"
    << "output: {db: " << name << ".db, dispatch: " << name << ".json, report: rep-" << name
    << "}\n";
  return s.str();
}

}  // namespace mactune::tuner::testing
