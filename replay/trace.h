// Decode traces: one teacher-forced sequence of a model's attention inputs, per layer
//   layer{L}.q_pre [T, Hq, D]   query before RoPE        (required)
//   layer{L}.k_pre [T, Hkv, D]  key before RoPE          (required)
//   layer{L}.v     [T, Hkv, D]  value                    (required)
//   layer{L}.o_ref [T, Hq, D]   the model's own attention output per head (optional)
// in a safetensors file (F32, F16 or BF16), RoPE base in __metadata__.rope_theta (or given by
// the caller), rotate-half convention, positions starting at 0, scale 1/sqrt(D). The format of
// data/traces/README.md; users write their own from any model with the same layout.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kernels/problem.h"
#include "replay/safetensors.h"

namespace mactune::replay {

// The largest magnitude a trace value may have: 2^56 (7.2e16). The CPU engine works in float32
// (largest 3.4e38 = 2^128): a squared distance sums D <= 1024 = 2^10 terms of (2 x)^2, a score
// D products, so with |x| <= 2^56 every sum stays below 2^124. A value near 3e38 is finite but
// would make NaN errors; real activations are many orders of magnitude below the bound.
inline constexpr float kMaxTraceMagnitude = 72057594037927936.0f;  // 2^56

// One layer's query stream, widened to float. Row t is decode position t.
struct TraceLayer {
  int layer = 0;
  int steps = 0, q_heads = 0, kv_heads = 0, head_dim = 0;
  std::vector<float> q_pre;  // [steps, q_heads, head_dim]
  std::vector<float> k_pre;  // [steps, kv_heads, head_dim]
  std::vector<float> v;      // [steps, kv_heads, head_dim]
  std::vector<float> o_ref;  // [steps, q_heads, head_dim], empty when the trace has none

  bool has_o_ref() const { return !o_ref.empty(); }
  const float* q_row(int t) const { return &q_pre[std::size_t(t) * q_heads * head_dim]; }
  const float* k_row(int t) const { return &k_pre[std::size_t(t) * kv_heads * head_dim]; }
  const float* v_row(int t) const { return &v[std::size_t(t) * kv_heads * head_dim]; }
  const float* o_ref_row(int t) const { return &o_ref[std::size_t(t) * q_heads * head_dim]; }
};

class DecodeTrace {
 public:
  // Opens and validates the file and the tensor layout of every layer (shapes, GQA, head_dim)
  // without reading tensor data. `rope_theta` overrides (or stands in for a missing) metadata
  // value. Throws InputError naming the file, the tensor and the problem.
  static DecodeTrace open(const std::string& path, std::optional<double> rope_theta = {});
  // The same over an in-memory safetensors image (tests, fuzzing).
  static DecodeTrace from_file(Safetensors file, std::optional<double> rope_theta = {});

  const Safetensors& file() const { return file_; }
  const std::string& source() const { return file_.source(); }
  std::string name() const;           // file name without directories
  const std::string& sha256() const;  // of the whole file, computed on first use
  double rope_theta() const { return rope_theta_; }
  const std::vector<int>& layers() const { return layers_; }  // ascending
  bool has_layer(int layer) const;
  // Throws InputError naming the layers the trace holds when it lacks `layer`.
  void require_layer(int layer) const;

  // Reads one layer; every value must be finite (the error names tensor and index).
  TraceLayer load_layer(int layer) const;
  // The decode problem of one layer (batch 1) with the given KV storage dtype.
  Problem problem(int layer, DType kv_dtype) const;
  // Decode positions (steps) of one layer, from its header.
  int steps(int layer) const;

 private:
  explicit DecodeTrace(Safetensors file) : file_(std::move(file)) {}
  void validate(std::optional<double> rope_theta);

  Safetensors file_;
  double rope_theta_ = 0.0;
  std::vector<int> layers_;
  mutable std::string sha256_;
};

// "layer2.q_pre" etc.
std::string trace_tensor_name(int layer, const char* what);

}  // namespace mactune::replay
