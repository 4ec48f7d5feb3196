// Shared helpers of the replay tests: the shipped traces, loaded once per process.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "replay/replay.h"

namespace mactune::replay::testing {

inline std::string trace_path(const std::string& name) {
  return std::string(MACTUNE_TRACE_DIR) + "/" + name;
}

// A shipped trace with its layer loaded and the exact f32-KV attention computed (cached).
struct LoadedTrace {
  DecodeTrace trace;
  TraceLayer layer;
  ExactAttention exact;
};

inline const LoadedTrace& loaded_trace(const std::string& file, int layer = 2) {
  static std::map<std::string, std::unique_ptr<LoadedTrace>> cache;
  auto& slot = cache[file + "#" + std::to_string(layer)];
  if (!slot) {
    DecodeTrace t = DecodeTrace::open(trace_path(file));
    TraceLayer l = t.load_layer(layer);
    ExactAttention ex = exact_attention(l, t.rope_theta(), DType::f32);
    slot = std::make_unique<LoadedTrace>(LoadedTrace{std::move(t), std::move(l), std::move(ex)});
  }
  return *slot;
}

// A file-name-safe rendering of a double for test names: 0.45 -> "0p45".
inline std::string name_number(double x) {
  std::string s = std::to_string(x);
  s.erase(s.find_last_not_of('0') + 1);
  if (!s.empty() && s.back() == '.') s.pop_back();
  for (char& c : s)
    if (c == '.') c = 'p';
  return s;
}

}  // namespace mactune::replay::testing
