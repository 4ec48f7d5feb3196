// The CUDA instance grid file (kernels/cuda/instances.txt) read into the instances a build
// compiles: the default grid by canonical name, or the cross product of the axes minus the
// configs over the shared-memory limit. Plain C++ over config.h (the name grammar) and launch.h
// (the shared-memory formula and its limit): CMake learns the instances from the generator that
// runs this at configure time (tools/instance_grid.cpp) and restates neither.
#pragma once

#include <algorithm>
#include <charconv>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/cuda/config.h"
#include "kernels/cuda/launch.h"
#include "kernels/error.h"

namespace mactune::cuda {

struct GridFile {
  std::vector<std::string> defaults;  // canonical names, in file order
  std::vector<std::pair<std::string, std::vector<std::string>>> axes;  // field -> values
};

// One instance of a grid: what CMake generates a translation unit and a registry entry for.
struct GridInstance {
  std::string_view family;  // attend, full, match or merge
  std::string name;         // canonical (config.h)
  std::string config;       // config_string()
};

// Reads the grid file's text; InputError "WHERE:LINE: why" on a line it cannot read.
GridFile parse_grid_file(std::string_view text, std::string_view where);

// The instances of the default grid (all = false) or of the full grid (all = true: the cross
// product of the axes, then any default it lacks), family by family (attend, full, match,
// merge), in grid order. InputError on a name that is not canonical, an axis value a config
// cannot take, a default over the shared-memory limit, an unknown or missing axis.
std::vector<GridInstance> grid_instances(const GridFile& grid, bool all);

// The config a canonical CUDA instance name spells, whatever its family (nullopt if none).
struct AnyConfig {
  std::string_view family;  // attend, full, match or merge
  AttendConfig attend;
  FullConfig full;
  MatchConfig match;
  MergeConfig merge;
};
std::optional<AnyConfig> parse_instance_name(std::string_view name);

}  // namespace mactune::cuda

// ---- Definitions.

namespace mactune::cuda {
namespace grid_detail {

inline std::vector<std::string_view> words(std::string_view line) {
  std::vector<std::string_view> out;
  for (std::size_t at = 0; at < line.size();) {
    at = line.find_first_not_of(" \t\r", at);
    if (at == std::string_view::npos) break;
    std::size_t end = std::min(line.find_first_of(" \t\r", at), line.size());
    out.push_back(line.substr(at, end - at));
    at = end;
  }
  return out;
}

inline int int_value(std::string_view field, std::string_view v) {
  int x = 0;
  const auto r = std::from_chars(v.data(), v.data() + v.size(), x);
  MACTUNE_REQUIRE(r.ec == std::errc() && r.ptr == v.data() + v.size(), "axis ", field, ": '", v,
                  "' is not an integer");
  return x;
}

inline const std::vector<std::string>& axis(const GridFile& g, std::string_view field) {
  for (const auto& [name, values] : g.axes)
    if (name == field) return values;
  input_error("the full grid has no axis '", field, "'");
}

template <class Config>
void keep(std::vector<GridInstance>& out, std::string_view family, const Config& c,
          bool over_limit_is_error) {
  const std::string name = instance_name(c);
  if (const std::string_view why = config_error(c); !why.empty()) input_error(name, ": ", why);
  if constexpr (std::is_same_v<Config, AttendConfig> || std::is_same_v<Config, FullConfig>) {
    if (!attend_smem_fits(c)) {
      MACTUNE_REQUIRE(!over_limit_is_error, name, ": needs ", attend_smem_bytes(c),
                      " bytes of shared memory, over the ", kMaxSmemPerCta, " a CTA may have");
      return;
    }
  }
  for (const GridInstance& i : out)
    if (i.name == name) return;
  out.push_back({family, name, config_string(c)});
}

}  // namespace grid_detail

inline GridFile parse_grid_file(std::string_view text, std::string_view where) {
  GridFile g;
  int line_no = 0;
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t end = std::min(text.find('\n', at), text.size());
    std::string_view line = text.substr(at, end - at);
    at = end + 1;
    ++line_no;
    line = line.substr(0, line.find('#'));
    const std::vector<std::string_view> w = grid_detail::words(line);
    if (w.empty()) continue;
    try {
      if (w[0] == "default") {
        MACTUNE_REQUIRE(w.size() == 2, "'default' takes one canonical instance name");
        MACTUNE_REQUIRE(parse_instance_name(w[1]).has_value(), "'", w[1],
                        "' is not a canonical CUDA instance name");
        g.defaults.emplace_back(w[1]);
      } else if (w[0] == "axis") {
        MACTUNE_REQUIRE(w.size() >= 3, "'axis' takes a field and at least one value");
        for (const auto& [name, values] : g.axes)
          MACTUNE_REQUIRE(name != w[1], "axis '", w[1], "' is listed twice");
        g.axes.emplace_back(std::string(w[1]), std::vector<std::string>(w.begin() + 2, w.end()));
      } else {
        input_error("'", w[0], "' is not 'default' or 'axis'");
      }
    } catch (const InputError& e) {
      input_error(where, ":", line_no, ": ", e.what());
    }
  }
  return g;
}

inline std::optional<AnyConfig> parse_instance_name(std::string_view name) {
  AnyConfig any;
  if (auto c = parse_attend_name(name)) {
    any.family = "attend";
    any.attend = *c;
  } else if (auto f = parse_full_name(name)) {
    any.family = "full";
    any.full = *f;
  } else if (auto m = parse_match_name(name)) {
    any.family = "match";
    any.match = *m;
  } else if (auto r = parse_merge_name(name)) {
    any.family = "merge";
    any.merge = *r;
  } else {
    return std::nullopt;
  }
  return any;
}

inline std::vector<GridInstance> grid_instances(const GridFile& grid, bool all) {
  using grid_detail::int_value;
  std::vector<GridInstance> attend, full, match, merge;
  if (all) {
    for (const auto& [field, values] : grid.axes)
      MACTUNE_REQUIRE(field == "head_dim" || field == "group" || field == "tile_tokens" ||
                          field == "stages" || field == "kv_dtype" || field == "probe",
                      "axis '", field, "' is not a field of a CUDA config");
    const auto& dims = grid_detail::axis(grid, "head_dim");
    const auto& groups = grid_detail::axis(grid, "group");
    const auto& tiles = grid_detail::axis(grid, "tile_tokens");
    const auto& stages = grid_detail::axis(grid, "stages");
    const auto& dtypes = grid_detail::axis(grid, "kv_dtype");
    const auto& probes = grid_detail::axis(grid, "probe");
    for (const std::string& d : dims)
      for (const std::string& g : groups)
        for (const std::string& t : tiles)
          for (const std::string& s : stages)
            for (const std::string& dt : dtypes) {
              const AttendConfig c{int_value("head_dim", d), int_value("group", g),
                                   int_value("tile_tokens", t), int_value("stages", s),
                                   parse_dtype(dt)};
              grid_detail::keep(attend, "attend", c, false);
              grid_detail::keep(
                  full, "full",
                  FullConfig{c.head_dim, c.group, c.tile_tokens, c.stages, c.kv_dtype}, false);
            }
    for (const std::string& d : dims) {
      for (const std::string& p : probes)
        for (const std::string& dt : dtypes) {
          const int probe = int_value("probe", p);
          MACTUNE_REQUIRE(probe == 0 || probe == 1, "axis probe: ", probe, " is not 0 or 1");
          grid_detail::keep(match, "match",
                            MatchConfig{int_value("head_dim", d), probe == 1, parse_dtype(dt)},
                            false);
        }
      grid_detail::keep(merge, "merge", MergeConfig{int_value("head_dim", d)}, false);
    }
  }
  for (const std::string& name : grid.defaults) {
    const std::optional<AnyConfig> c = parse_instance_name(name);
    MACTUNE_REQUIRE(c.has_value(), "'", name, "' is not a canonical CUDA instance name");
    if (c->family == "attend")
      grid_detail::keep(attend, c->family, c->attend, true);
    else if (c->family == "full")
      grid_detail::keep(full, c->family, c->full, true);
    else if (c->family == "match")
      grid_detail::keep(match, c->family, c->match, true);
    else
      grid_detail::keep(merge, c->family, c->merge, true);
  }
  std::vector<GridInstance> out = std::move(attend);
  for (auto* part : {&full, &match, &merge}) out.insert(out.end(), part->begin(), part->end());
  return out;
}

}  // namespace mactune::cuda
