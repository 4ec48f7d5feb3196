// Helpers for tests that run the real `mactune` binary: a temporary directory, tiny specs, and
// the child-process runner of tests/cli_process.h.
#pragma once

#include <sys/stat.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <sstream>
#include <string>
#include <vector>

#include "replay/safetensors.h"
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

// A refused command: exit 2, one line with the prefix, every part in it.
inline void expect_refused(const CliResult& r, std::initializer_list<std::string> parts) {
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_EQ(r.err.rfind("mactune: error: ", 0), 0u) << r.err;
  EXPECT_EQ(r.err_lines(), 1) << r.err;
  for (const auto& p : parts)
    EXPECT_NE(r.err.find(p), std::string::npos) << "[" << p << "] in " << r.err;
}

// A one-layer trace (layer 3: q_pre, k_pre, v) of T steps of uniform values in [-0.5, 0.5).
inline void write_trace(const TempDir& dir, const std::string& name, int head_dim = 64, int T = 8,
                        int q_heads = 4, int kv_heads = 2) {
  std::vector<float> q(std::size_t(T) * q_heads * head_dim),
      kv(std::size_t(T) * kv_heads * head_dim);
  std::uint32_t x = 12345;
  for (auto* v : {&q, &kv})
    for (float& f : *v) f = float((x = x * 1664525u + 1013904223u) >> 8) / float(1 << 24) - 0.5f;
  const auto bytes = replay::write_safetensors({{"layer3.q_pre", {T, q_heads, head_dim}, q},
                                                {"layer3.k_pre", {T, kv_heads, head_dim}, kv},
                                                {"layer3.v", {T, kv_heads, head_dim}, kv}},
                                               {{"rope_theta", "10000"}});
  std::ofstream(dir.file(name), std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

}  // namespace mactune::tuner::testing
