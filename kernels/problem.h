// The shape of one decode-attention step and the MAC-Attention settings that apply to it.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>

#include "kernels/dtype.h"
#include "kernels/error.h"
#include "kernels/fields.h"

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
  bool operator==(const Problem&) const = default;
};

// The shape a dispatch-table entry covers: every field of Problem but the batch.
struct ShapeKey {
  int head_dim = 128;
  int q_heads = 32;
  int kv_heads = 8;
  DType kv_dtype = DType::bf16;
  int page_size = 16;

  static ShapeKey of(const Problem& p) {
    return {p.head_dim, p.q_heads, p.kv_heads, p.kv_dtype, p.page_size};
  }
  Problem problem(int batch = 1) const {  // for validation and instance checks
    return {batch, q_heads, kv_heads, head_dim, kv_dtype, page_size};
  }
  std::string text() const;  // "hd128_q32_kv8_bf16_p16"
  auto operator<=>(const ShapeKey&) const = default;
};

// One bucket of measurements and decisions: a shape at one batch and one context (KV tokens
// per request). The same key names it in the tuner, the database and the reports.
struct Bucket {
  ShapeKey shape;
  int batch = 1;
  long long context = 0;

  static Bucket of(const Problem& p, long long context) {
    return {ShapeKey::of(p), p.batch, context};
  }
  Problem problem() const { return shape.problem(batch); }
  std::string key() const;  // "hd128_q32_kv8_bf16_p16_b4_c16384"
  auto operator<=>(const Bucket&) const = default;
};

// Returns "" when the shape is valid, else one sentence naming the bad value.
std::string validate(const Problem& p);
// The same check, with the field it is about (the first found; validate() is its sentence).
std::optional<FieldProblem> shape_problem(const Problem& p);
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

template <>
struct EnumNames<PickRule> {
  static constexpr std::string_view what = "pick rule";
  static constexpr EnumName<PickRule> names[] = {{PickRule::nearest, "nearest"},
                                                 {PickRule::newest, "newest"},
                                                 {PickRule::normalized, "normalized"}};
};
template <>
struct EnumNames<Rectify> {
  static constexpr std::string_view what = "rectify mode";
  static constexpr EnumName<Rectify> names[] = {{Rectify::forward, "forward"},
                                                {Rectify::subtract, "subtract"}};
};

// MAC-Attention settings of one layer (DESIGN.md section 1). Defaults are the reference's.
struct MacParams {
  int ring_capacity = 512;  // K: ring entries per (request, query head); slot = position mod K
  int band = 256;           // r: tokens always recomputed; cache_end(p) = max(p + 1 - r, 0)
  double tau = 0.45;        // hit iff d^2 < 2 D (1 - tau)^2; tau >= 1 disables hits
  PickRule pick = PickRule::nearest;
  int min_context = 2048;  // steps with m < min_context are misses (that still write the ring)
  DType summary_dtype = DType::f32;  // storage of the ring's summary o (bf16 or f32)
  Rectify rectify = Rectify::forward;
  double accept_eps = 1.0;  // acceptance gate: keep a hit only if the reused mass alpha < eps
  // Group-coherent hits: a (request, KV head) group keeps its hits only if every head of it
  // hits, before and after the acceptance gate. A group streams its KV from the smallest start
  // of its heads, so one miss makes it read everything: a hit beside a miss saves no KV read
  // and only adds error (docs/design.md, "Group-coherent hits").
  bool group_hits = false;
  double subtract_guard = 1e-4;  // subtract mode: entry is empty when 1 - t < guard (t -> 1)
  bool operator==(const MacParams&) const = default;
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

// ---- Field tables (kernels/fields.h): the one description of each struct's settings.

template <>
struct mactune::FieldTable<mactune::Problem> {
  static const std::vector<Field<Problem>>& fields() {
    static const std::vector<Field<Problem>> t = {
        field<&Problem::head_dim>("head_dim", "head_dim", "D, the head dimension").range(2, 1024),
        field<&Problem::q_heads>("q_heads", "q_heads", "Hq, query heads per layer").range(1, 4096),
        field<&Problem::kv_heads>("kv_heads", "kv_heads", "Hkv, KV heads per layer").range(1, 4096),
        field<&Problem::kv_dtype>("dtype", "kv_dtype", "KV cache dtype: f32, f16, bf16"),
        field<&Problem::page_size>("page_size", "page_size", "tokens per KV page").range(1, 65536),
        field<&Problem::batch>("batch", "batch", "requests per decode step").range(1, 65536),
    };
    return t;
  }
};

template <>
struct mactune::FieldTable<mactune::MacParams> {
  static const std::vector<Field<MacParams>>& fields() {
    using M = MacParams;
    static const std::vector<Field<M>> t = {
        field<&M::ring_capacity>("K", "ring_capacity", "ring capacity per (request, query head)")
            .range(1, 1 << 20),
        field<&M::band>("r", "band", "band: tokens always recomputed").range(1, kMaxContext),
        field<&M::tau>("tau", "tau", "match threshold: hit iff d^2 < 2 D (1 - tau)^2")
            .range(0, 1e6),
        field<&M::summary_dtype>("summary_dtype", "summary_dtype", "ring summary o: bf16, f32")
            .only({"bf16", "f32"}),
        field<&M::pick>("pick", "pick", "pick rule: nearest, newest, normalized"),
        field<&M::rectify>("rectify", "rectify", "ring entry: forward, subtract"),
        field<&M::accept_eps>("accept_eps", "accept_eps", "acceptance gate epsilon (1: off)")
            .range(0, 1)
            .open_below(),
        field<&M::min_context>("min_context", "min_context",
                               "steps below this position are plain misses")
            .range(0, kMaxContext),
        field<&M::subtract_guard>("subtract_guard", "subtract_guard",
                                  "rectify subtract: the entry is empty when 1 - t < this")
            .range(0, 1)
            .open_below()
            .open_above(),
        field<&M::group_hits>("group_hits", "group_hits",
                              "hits only in KV groups where every head hits"),
    };
    return t;
  }
};

// ---- Definitions.

namespace mactune {

inline std::string ShapeKey::text() const {
  std::ostringstream k;
  k << "hd" << head_dim << "_q" << q_heads << "_kv" << kv_heads << '_' << dtype_name(kv_dtype)
    << "_p" << page_size;
  return k.str();
}

inline std::string Bucket::key() const {
  return shape.text() + "_b" + std::to_string(batch) + "_c" + std::to_string(context);
}

inline double Problem::scale() const {
  return 1.0 / std::sqrt(static_cast<double>(head_dim));
}

inline std::optional<FieldProblem> shape_problem(const Problem& p) {
  const auto at = [](const char* field, auto&&... parts) {
    std::ostringstream e;
    e << field << " = ";
    (e << ... << parts);
    return FieldProblem{field, e.str()};
  };
  if (p.batch < 1) return at("batch", p.batch, " must be at least 1");
  if (p.q_heads < 1) return at("q_heads", p.q_heads, " must be at least 1");
  if (p.kv_heads < 1) return at("kv_heads", p.kv_heads, " must be at least 1");
  if (p.q_heads % p.kv_heads != 0)
    return at("kv_heads", p.kv_heads, " does not divide q_heads = ", p.q_heads);
  if (p.head_dim < 1 || p.head_dim > 1024 || p.head_dim % 2 != 0)
    return at("head_dim", p.head_dim, " must be even and in [2, 1024]");
  if (p.page_size < 1) return at("page_size", p.page_size, " must be at least 1");
  return range_problem(p);  // the table's upper bounds (batch <= 65536, ...)
}

inline std::string validate(const Problem& p) {
  const std::optional<FieldProblem> why = shape_problem(p);
  return why ? why->why : std::string();
}

inline void require_valid(const Problem& p) {
  const std::string why = validate(p);
  MACTUNE_REQUIRE(why.empty(), "invalid problem: ", why);
}

inline std::string validate(const MacParams& p) {
  return range_error(p);  // the table's ranges and choices (above)
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
