// The shape of one decode-attention step and the MAC-Attention settings that apply to it.
#pragma once

#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>

#include "kernels/dtype.h"
#include "kernels/error.h"

namespace mactune {

inline constexpr int kMaxContext = 1 << 30;  // positions are int32 everywhere

// One layer's decode step over a batch: q [batch, q_heads, head_dim], KV [.., kv_heads, head_dim].
struct Problem {
  int batch = 1;
  int q_heads = 32;
  int kv_heads = 8;
  int head_dim = 128;
  DType kv_dtype = DType::bf16;
  int page_size = 16;  // tokens per KV page

  int group_size() const { return kv_heads > 0 ? q_heads / kv_heads : 0; }  // G = Hq / Hkv
  double scale() const;                                                     // 1 / sqrt(D)
};

// Returns "" when the shape is valid, else one sentence naming the bad value.
std::string validate(const Problem& p);
// Throws InputError with validate()'s sentence.
void require_valid(const Problem& p);

// How a hit's ring entry is chosen among the candidates under the threshold.
enum class PickRule : std::uint8_t {
  nearest,     // smallest d^2, ties to the older position (the reference)
  newest,      // the most recent candidate under the threshold: the shortest band + tail
  normalized,  // nearest on q / |q| * sqrt(D), so tau means the same on every layer
};
// How the new ring entry is built.
enum class Rectify : std::uint8_t {
  forward,   // entry = prefix (+) band, snapshotted during the one pass: no subtraction
  subtract,  // entry = output (-) tail (the paper's online removal), kept for comparison
};

std::string_view pick_rule_name(PickRule r);
PickRule parse_pick_rule(std::string_view s);
std::string_view rectify_name(Rectify r);
Rectify parse_rectify(std::string_view s);

// MAC-Attention settings of one layer (DESIGN.md section 1). Defaults are the reference's.
struct MacParams {
  int ring_capacity = 512;  // K: ring entries per (request, query head); slot = position mod K
  int band = 256;           // r: tokens always recomputed; cache_end(p) = max(p + 1 - r, 0)
  double tau = 0.45;        // hit iff d^2 < 2 D (1 - tau)^2; tau >= 1 disables hits
  PickRule pick = PickRule::nearest;
  int min_context = 2048;  // steps with m < min_context are misses (that still write the ring)
  DType summary_dtype = DType::f32;  // storage of the ring's summary o (bf16 or f32)
  Rectify rectify = Rectify::forward;
  double accept_eps = 1.0;       // acceptance gate: keep a hit only if the reused mass alpha < eps
  double subtract_guard = 1e-4;  // subtract mode: entry is empty when 1 - t < guard (t -> 1)
};

// Returns "" when the settings are valid, else one sentence naming the bad value.
std::string validate(const MacParams& p);
void require_valid(const MacParams& p);

// ---- Ring geometry (DESIGN.md section 1).

// First position not covered by the ring entry of position p: everything but its last r tokens.
constexpr int cache_end(int p, int band) {
  return p + 1 - band > 0 ? p + 1 - band : 0;
}
constexpr int ring_slot(int p, int capacity) {
  return p % capacity;
}
// Squared-distance threshold 2 D (1 - tau)^2; no hit is possible when tau >= 1.
constexpr double match_threshold(int head_dim, double tau) {
  return tau >= 1.0 ? 0.0 : 2.0 * head_dim * (1.0 - tau) * (1.0 - tau);
}

// Ring bytes over KV-cache bytes of one layer at context L (DESIGN.md section 1):
// Hq K (D s_q + D s_o + 4) / (2 L Hkv D s_kv), with the ring's q in the KV dtype.
double aux_memory_ratio(int group_size, int head_dim, int ring_capacity, long long context,
                        DType kv_dtype, DType summary_dtype);

}  // namespace mactune

// ---- Definitions.

namespace mactune {

inline double Problem::scale() const {
  return 1.0 / std::sqrt(static_cast<double>(head_dim));
}

inline std::string validate(const Problem& p) {
  std::ostringstream e;
  if (p.batch < 1)
    e << "batch = " << p.batch << " must be at least 1";
  else if (p.q_heads < 1)
    e << "q_heads = " << p.q_heads << " must be at least 1";
  else if (p.kv_heads < 1)
    e << "kv_heads = " << p.kv_heads << " must be at least 1";
  else if (p.q_heads % p.kv_heads != 0)
    e << "kv_heads = " << p.kv_heads << " does not divide q_heads = " << p.q_heads;
  else if (p.head_dim < 1 || p.head_dim > 1024 || p.head_dim % 2 != 0)
    e << "head_dim = " << p.head_dim << " must be even and in [2, 1024]";
  else if (p.page_size < 1)
    e << "page_size = " << p.page_size << " must be at least 1";
  return e.str();
}

inline void require_valid(const Problem& p) {
  const std::string why = validate(p);
  MACTUNE_REQUIRE(why.empty(), "invalid problem: ", why);
}

inline std::string_view pick_rule_name(PickRule r) {
  switch (r) {
    case PickRule::nearest:
      return "nearest";
    case PickRule::newest:
      return "newest";
    case PickRule::normalized:
      return "normalized";
  }
  return "?";
}

inline PickRule parse_pick_rule(std::string_view s) {
  if (s == "nearest") return PickRule::nearest;
  if (s == "newest") return PickRule::newest;
  if (s == "normalized") return PickRule::normalized;
  input_error("unknown pick rule '", s, "' (expected nearest, newest or normalized)");
}

inline std::string_view rectify_name(Rectify r) {
  return r == Rectify::forward ? "forward" : "subtract";
}

inline Rectify parse_rectify(std::string_view s) {
  if (s == "forward") return Rectify::forward;
  if (s == "subtract") return Rectify::subtract;
  input_error("unknown rectify mode '", s, "' (expected forward or subtract)");
}

inline std::string validate(const MacParams& p) {
  std::ostringstream e;
  if (p.ring_capacity < 1)
    e << "K = " << p.ring_capacity << " must be at least 1";
  else if (p.band < 1)
    e << "r = " << p.band << " must be at least 1";
  else if (!(p.tau >= 0.0) || !std::isfinite(p.tau))
    e << "tau = " << p.tau << " must be >= 0";
  else if (p.min_context < 0)
    e << "min_context = " << p.min_context << " must be >= 0";
  else if (p.summary_dtype == DType::f16)
    e << "summary dtype f16 is not supported (use bf16 or f32)";
  else if (!(p.accept_eps > 0.0) || p.accept_eps > 1.0)
    e << "accept_eps = " << p.accept_eps << " must be in (0, 1]";
  else if (!(p.subtract_guard > 0.0) || p.subtract_guard >= 1.0)
    e << "subtract_guard = " << p.subtract_guard << " must be in (0, 1)";
  return e.str();
}

inline void require_valid(const MacParams& p) {
  const std::string why = validate(p);
  MACTUNE_REQUIRE(why.empty(), "invalid MAC settings: ", why);
}

inline double aux_memory_ratio(int group_size, int head_dim, int ring_capacity, long long context,
                               DType kv_dtype, DType summary_dtype) {
  const double sq = static_cast<double>(dtype_size(kv_dtype));
  const double so = static_cast<double>(dtype_size(summary_dtype));
  const double D = head_dim;
  const double ring = static_cast<double>(ring_capacity) * (D * sq + D * so + 4.0);
  const double kv = 2.0 * static_cast<double>(context) * D * sq;
  return group_size * ring / kv;
}

}  // namespace mactune
