// Config structs of the CUDA kernel families and their canonical instance names.
//
// One struct per family. Each is a structural type, so the same value is a runtime record (the
// registry, the database, dispatch tables) and a template argument (`attend_kernel<C>`): the
// instance grid in kernels/cuda/instances.txt is written once and both come from it.
//
//   attend_cuda_hd128_g4_t64_s2_bf16   split-KV MAC attention over planned work items
//   full_cuda_hd128_g8_t64_s2_bf16     the full-attention baseline (same pipeline, no masks)
//   match_cuda_hd128_p1_bf16           ring scan; p1 = exact early-exit probe on half the dims
//   merge_cuda_hd128                   partials + ring summary -> output and new ring entry
//
// Plain C++ (no CUDA headers): host code and tests include it.
#pragma once

#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>

#include "kernels/dtype.h"

namespace mactune::cuda {

// Split-KV attention of one (request, KV head) group over a KV range: all heads of the group
// share each K/V tile; each head masks positions below its own start.
struct AttendConfig {
  int head_dim = 128;    // D: 64, 128 or 256
  int group = 4;         // G: query heads per KV head (runs any G' <= G, padding rows masked)
  int tile_tokens = 64;  // KV tokens per pipeline stage (4 warps x 16 tokens x n)
  int stages = 2;        // cp.async pipeline depth
  DType kv_dtype = DType::bf16;
  constexpr bool operator==(const AttendConfig&) const = default;
};

// The full-attention baseline: occupancy-budgeted split-KV over [0, kv_len), no start masks.
struct FullConfig {
  int head_dim = 128;
  int group = 4;
  int tile_tokens = 64;
  int stages = 2;
  DType kv_dtype = DType::bf16;
  constexpr bool operator==(const FullConfig&) const = default;
};

// Ring scan: fp32 squared distances of the current pre-RoPE query to the ring's queries.
struct MatchConfig {
  int head_dim = 128;
  bool probe = false;  // skip the second half of a row once the first half reaches the threshold
  DType kv_dtype = DType::bf16;  // storage of the ring's queries (the KV dtype)
  constexpr bool operator==(const MatchConfig&) const = default;
};

// Merge of a head's partial states with its ring summary; writes the output and the ring entry.
struct MergeConfig {
  int head_dim = 128;
  constexpr bool operator==(const MergeConfig&) const = default;
};

// The shared pipeline of full and attend: a full instance runs attend's device code unmasked.
constexpr AttendConfig as_attend(const FullConfig& f) {
  return AttendConfig{f.head_dim, f.group, f.tile_tokens, f.stages, f.kv_dtype};
}

// ---- Validity of a config (checked by static_assert in the launchers and by the registry).

constexpr bool supported_head_dim(int d) {
  return d == 64 || d == 128 || d == 256;
}
constexpr bool supported_kv_dtype(DType t) {
  return t == DType::bf16 || t == DType::f16;
}

// "" when the config can be compiled, else the reason.
constexpr std::string_view config_error(const AttendConfig& c) {
  if (!supported_head_dim(c.head_dim)) return "head_dim must be 64, 128 or 256";
  if (c.group < 1 || c.group > 16) return "group must be in [1, 16] (one 16-row MMA tile)";
  if (c.tile_tokens < 64 || c.tile_tokens > 256 || c.tile_tokens % 64 != 0)
    return "tile_tokens must be 64, 128, 192 or 256 (4 warps x 16-token MMA steps)";
  if (c.stages < 2 || c.stages > 4) return "stages must be 2, 3 or 4";
  if (!supported_kv_dtype(c.kv_dtype)) return "kv_dtype must be bf16 or f16";
  return "";
}
constexpr std::string_view config_error(const FullConfig& c) {
  return config_error(as_attend(c));
}
constexpr std::string_view config_error(const MatchConfig& c) {
  if (!supported_head_dim(c.head_dim)) return "head_dim must be 64, 128 or 256";
  if (!supported_kv_dtype(c.kv_dtype)) return "kv_dtype must be bf16 or f16";
  return "";
}
constexpr std::string_view config_error(const MergeConfig& c) {
  if (!supported_head_dim(c.head_dim)) return "head_dim must be 64, 128 or 256";
  return "";
}

// ---- Canonical names and config strings (derived from every field).

inline std::string instance_name(const AttendConfig& c) {
  std::ostringstream s;
  s << "attend_cuda_hd" << c.head_dim << "_g" << c.group << "_t" << c.tile_tokens << "_s"
    << c.stages << '_' << dtype_name(c.kv_dtype);
  return s.str();
}
inline std::string instance_name(const FullConfig& c) {
  std::ostringstream s;
  s << "full_cuda_hd" << c.head_dim << "_g" << c.group << "_t" << c.tile_tokens << "_s" << c.stages
    << '_' << dtype_name(c.kv_dtype);
  return s.str();
}
inline std::string instance_name(const MatchConfig& c) {
  std::ostringstream s;
  s << "match_cuda_hd" << c.head_dim << "_p" << (c.probe ? 1 : 0) << '_' << dtype_name(c.kv_dtype);
  return s.str();
}
inline std::string instance_name(const MergeConfig& c) {
  return "merge_cuda_hd" + std::to_string(c.head_dim);
}

// "key=value,..." for the database's config column.
inline std::string config_string(const AttendConfig& c) {
  std::ostringstream s;
  s << "head_dim=" << c.head_dim << ",group=" << c.group << ",tile_tokens=" << c.tile_tokens
    << ",stages=" << c.stages << ",kv_dtype=" << dtype_name(c.kv_dtype);
  return s.str();
}
inline std::string config_string(const FullConfig& c) {
  return config_string(as_attend(c));
}
inline std::string config_string(const MatchConfig& c) {
  std::ostringstream s;
  s << "head_dim=" << c.head_dim << ",probe=" << (c.probe ? 1 : 0)
    << ",kv_dtype=" << dtype_name(c.kv_dtype);
  return s.str();
}
inline std::string config_string(const MergeConfig& c) {
  return "head_dim=" + std::to_string(c.head_dim);
}

// Parses a canonical name back into its config (nullopt when it is not one); name(parse(n)) == n.
// constexpr: the generated instance tags take their configs from their names
// (`static constexpr AttendConfig config = parse_attend_name("attend_cuda_...").value()`), so
// the grammar is this one.
constexpr std::optional<AttendConfig> parse_attend_name(std::string_view name);
constexpr std::optional<FullConfig> parse_full_name(std::string_view name);
constexpr std::optional<MatchConfig> parse_match_name(std::string_view name);
constexpr std::optional<MergeConfig> parse_merge_name(std::string_view name);

}  // namespace mactune::cuda

// ---- Definitions.

namespace mactune::cuda::detail {

// Consumes "<prefix><int>" from the front of s.
constexpr bool take_int(std::string_view& s, std::string_view prefix, int& out) {
  if (s.substr(0, prefix.size()) != prefix) return false;
  s.remove_prefix(prefix.size());
  std::size_t n = 0;
  long long v = 0;
  while (n < s.size() && s[n] >= '0' && s[n] <= '9' && n < 9) v = v * 10 + (s[n++] - '0');
  if (n == 0 || (n > 1 && s[0] == '0')) return false;
  s.remove_prefix(n);
  out = static_cast<int>(v);
  return true;
}

constexpr bool take_dtype(std::string_view s, DType& out) {
  for (DType t : {DType::f32, DType::f16, DType::bf16})
    if (s == dtype_name(t)) {
      out = t;
      return true;
    }
  return false;
}

// "<family>_cuda_hd{D}_g{G}_t{T}_s{S}_{dtype}" for attend and full.
template <class Config>
constexpr std::optional<Config> parse_tiled(std::string_view name, std::string_view family) {
  Config c{};
  std::string_view s = name;
  if (s.substr(0, family.size()) != family) return std::nullopt;
  s.remove_prefix(family.size());
  if (!take_int(s, "_cuda_hd", c.head_dim) || !take_int(s, "_g", c.group) ||
      !take_int(s, "_t", c.tile_tokens) || !take_int(s, "_s", c.stages) || s.empty() ||
      s[0] != '_' || !take_dtype(s.substr(1), c.kv_dtype))
    return std::nullopt;
  return c;
}

}  // namespace mactune::cuda::detail

namespace mactune::cuda {

constexpr std::optional<AttendConfig> parse_attend_name(std::string_view name) {
  return detail::parse_tiled<AttendConfig>(name, "attend");
}
constexpr std::optional<FullConfig> parse_full_name(std::string_view name) {
  return detail::parse_tiled<FullConfig>(name, "full");
}
constexpr std::optional<MatchConfig> parse_match_name(std::string_view name) {
  MatchConfig c{};
  std::string_view s = name;
  int probe = 0;
  if (!detail::take_int(s, "match_cuda_hd", c.head_dim) || !detail::take_int(s, "_p", probe) ||
      probe > 1 || s.empty() || s[0] != '_' || !detail::take_dtype(s.substr(1), c.kv_dtype))
    return std::nullopt;
  c.probe = probe == 1;
  return c;
}
constexpr std::optional<MergeConfig> parse_merge_name(std::string_view name) {
  MergeConfig c{};
  std::string_view s = name;
  if (!detail::take_int(s, "merge_cuda_hd", c.head_dim) || !s.empty()) return std::nullopt;
  return c;
}

}  // namespace mactune::cuda
