// The plain-data form of a dispatch table that write_header() emits: constexpr arrays of
// literal types, so a table compiled into an engine costs no parsing and no file at run time.
// from_static() turns it into the same DispatchTable the JSON loader produces, so both forms
// go through the same validation and the same select().
#pragma once

#include <cstdint>

#include "dispatcher/table.h"

namespace mactune::dispatch {

enum class StaticParamKind : std::uint8_t { integer, real, boolean, string };

struct StaticParam {
  const char* key;
  StaticParamKind kind;
  std::int64_t integer;  // integer, boolean (0/1)
  double real;
  const char* string;
};

inline constexpr std::int64_t kUnbounded = -1;  // an interval's hi with no bound

struct StaticEntry {
  int head_dim, q_heads, kv_heads;
  const char* dtype;
  int page_size;
  std::int64_t batch_lo, batch_hi;  // batch_hi == kUnbounded: no upper bound
  std::int64_t context_lo, context_hi;
  const char* full_instance;
  const StaticParam* full_params;
  int full_param_count;
  bool has_mac;
  const char* mac_instance;
  int ring_capacity, band;
  bool has_tau;
  double tau;
  const StaticParam* mac_params;
  int mac_param_count;
  bool has_min_hit_rate;
  double min_hit_rate;
  const char* note;
};

struct StaticTable {
  const char* schema;
  const char* backend;
  const char* device_name;
  const char* fingerprint;
  const char* version;
  const char* git_revision;
  const char* source_database;
  const char* time;
  const StaticEntry* entries;
  int entry_count;
};

namespace detail {

inline Params params_from_static(const StaticParam* p, int n) {
  Params out;
  for (int i = 0; i < n; ++i) {
    switch (p[i].kind) {
      case StaticParamKind::integer:
        out.emplace(p[i].key, p[i].integer);
        break;
      case StaticParamKind::real:
        out.emplace(p[i].key, p[i].real);
        break;
      case StaticParamKind::boolean:
        out.emplace(p[i].key, p[i].integer != 0);
        break;
      case StaticParamKind::string:
        out.emplace(p[i].key, std::string(p[i].string));
        break;
    }
  }
  return out;
}

inline Interval interval_from_static(std::int64_t lo, std::int64_t hi) {
  Interval iv;
  iv.lo = lo;
  if (hi != kUnbounded) iv.hi = hi;
  return iv;
}

}  // namespace detail

// The DispatchTable a generated header describes (parse_dtype and parse_enum throw on an
// unknown dtype or backend, which a header written by write_header() never holds).
inline DispatchTable from_static(const StaticTable& s) {
  DispatchTable t;
  t.schema = s.schema;
  t.device = {parse_enum<Backend>(s.backend), s.device_name, s.fingerprint};
  t.generated = {s.version, s.git_revision, s.source_database, s.time};
  t.entries.reserve(static_cast<std::size_t>(s.entry_count));
  for (int i = 0; i < s.entry_count; ++i) {
    const StaticEntry& e = s.entries[i];
    Entry out;
    out.shape = {e.head_dim, e.q_heads, e.kv_heads, parse_dtype(e.dtype), e.page_size};
    out.batch = detail::interval_from_static(e.batch_lo, e.batch_hi);
    out.context = detail::interval_from_static(e.context_lo, e.context_hi);
    out.full = {e.full_instance, detail::params_from_static(e.full_params, e.full_param_count)};
    if (e.has_mac) {
      MacChoice m;
      m.instance = e.mac_instance;
      m.ring_capacity = e.ring_capacity;
      m.band = e.band;
      if (e.has_tau) m.tau = e.tau;
      m.params = detail::params_from_static(e.mac_params, e.mac_param_count);
      out.mac = std::move(m);
    }
    if (e.has_min_hit_rate) out.min_hit_rate = e.min_hit_rate;
    out.note = e.note;
    t.entries.push_back(std::move(out));
  }
  return t;
}

}  // namespace mactune::dispatch
