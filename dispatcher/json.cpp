// Dispatch tables as JSON: a strict reader (every key known, every type checked, errors name
// the JSON path) and a writer that keeps the documented key order.
#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <vector>

#include "dispatcher/table.h"
#include "kernels/error.h"
#include "kernels/file_io.h"
#include "kernels/json_error.h"

namespace mactune::dispatch {
namespace {

using json = nlohmann::json;
using ordered = nlohmann::ordered_json;

// Reading: each helper names the JSON path of what it reads, so an error says where.
class Reader {
 public:
  explicit Reader(std::string_view origin) : origin_(origin) {}

  [[noreturn]] void fail(const std::string& path, const std::string& what) const {
    input_error("dispatch table '", origin_, "': ", path, ": ", what);
  }

  static std::string type_of(const json& v) {
    if (v.is_number_integer()) return "an integer";
    if (v.is_number()) return "a number";
    return std::string("a") + (v.is_object() || v.is_array() ? "n " : " ") + v.type_name();
  }

  const json& object(const json& v, const std::string& path,
                     std::initializer_list<std::string_view> required,
                     std::initializer_list<std::string_view> optional = {}) const {
    if (!v.is_object()) fail(path, "expected an object, got " + type_of(v));
    for (const auto& [key, _] : v.items()) {
      bool known = false;
      for (auto k : required) known = known || key == k;
      for (auto k : optional) known = known || key == k;
      if (!known) fail(path, "unknown key '" + key + "'");
    }
    for (auto k : required)
      if (!v.contains(k)) fail(path, "missing key '" + std::string(k) + "'");
    return v;
  }

  std::string string(const json& v, const std::string& path) const {
    if (!v.is_string()) fail(path, "expected a string, got " + type_of(v));
    return v.get<std::string>();
  }

  std::int64_t integer(const json& v, const std::string& path, std::int64_t lo,
                       std::int64_t hi) const {
    if (!v.is_number_integer()) fail(path, "expected an integer, got " + type_of(v));
    if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(hi))
      fail(path, std::to_string(v.get<std::uint64_t>()) + " is out of range");
    const std::int64_t x = v.get<std::int64_t>();
    if (x < lo || x > hi)
      fail(path, std::to_string(x) + " is out of range [" + std::to_string(lo) + ", " +
                     std::to_string(hi) + "]");
    return x;
  }

  double number(const json& v, const std::string& path) const {
    if (!v.is_number()) fail(path, "expected a number, got " + type_of(v));
    return v.get<double>();
  }

  Interval interval(const json& v, const std::string& path) const {
    if (!v.is_array() || v.size() != 2)
      fail(path, "expected [lo, hi] (hi may be null), got " + type_of(v));
    Interval iv;
    iv.lo = integer(v[0], path + "[0]", 1, std::numeric_limits<std::int64_t>::max());
    if (!v[1].is_null())
      iv.hi = integer(v[1], path + "[1]", 1, std::numeric_limits<std::int64_t>::max());
    return iv;
  }

  Params params(const json& v, const std::string& path) const {
    if (!v.is_object()) fail(path, "expected an object, got " + type_of(v));
    Params out;
    for (const auto& [key, value] : v.items()) {
      const std::string at = path + "." + key;
      if (value.is_boolean())
        out.emplace(key, value.get<bool>());
      else if (value.is_number_integer())
        out.emplace(key, integer(value, at, std::numeric_limits<std::int64_t>::min(),
                                 std::numeric_limits<std::int64_t>::max()));
      else if (value.is_number())
        out.emplace(key, value.get<double>());
      else if (value.is_string())
        out.emplace(key, value.get<std::string>());
      else
        fail(at, "a parameter must be a number, a boolean or a string, got " + type_of(value));
    }
    return out;
  }

  DType dtype(const json& v, const std::string& path) const {
    const std::string s = string(v, path);
    try {
      return parse_dtype(s);
    } catch (const InputError& e) {
      fail(path, e.what());
    }
  }

  Entry entry(const json& v, const std::string& p) const {
    object(v, p, {"shape", "batch", "context", "full", "mac", "min_hit_rate"}, {"note"});
    Entry e;
    const json& s =
        object(v["shape"], p + ".shape", {"head_dim", "q_heads", "kv_heads", "dtype", "page_size"});
    e.shape.head_dim = static_cast<int>(integer(s["head_dim"], p + ".shape.head_dim", 1, INT_MAX));
    e.shape.q_heads = static_cast<int>(integer(s["q_heads"], p + ".shape.q_heads", 1, INT_MAX));
    e.shape.kv_heads = static_cast<int>(integer(s["kv_heads"], p + ".shape.kv_heads", 1, INT_MAX));
    e.shape.kv_dtype = dtype(s["dtype"], p + ".shape.dtype");
    e.shape.page_size =
        static_cast<int>(integer(s["page_size"], p + ".shape.page_size", 1, INT_MAX));
    e.batch = interval(v["batch"], p + ".batch");
    e.context = interval(v["context"], p + ".context");
    const json& f = object(v["full"], p + ".full", {"instance", "params"});
    e.full.instance = string(f["instance"], p + ".full.instance");
    e.full.params = params(f["params"], p + ".full.params");
    if (!v["mac"].is_null()) {
      const json& m = object(v["mac"], p + ".mac", {"instance", "K", "r", "params"}, {"tau"});
      MacChoice mac;
      mac.instance = string(m["instance"], p + ".mac.instance");
      mac.ring_capacity = static_cast<int>(integer(m["K"], p + ".mac.K", 1, INT_MAX));
      mac.band = static_cast<int>(integer(m["r"], p + ".mac.r", 1, INT_MAX));
      if (m.contains("tau") && !m["tau"].is_null()) mac.tau = number(m["tau"], p + ".mac.tau");
      mac.params = params(m["params"], p + ".mac.params");
      e.mac = std::move(mac);
    }
    if (!v["min_hit_rate"].is_null())
      e.min_hit_rate = number(v["min_hit_rate"], p + ".min_hit_rate");
    if (v.contains("note")) e.note = string(v["note"], p + ".note");
    return e;
  }

  DispatchTable table(const json& root) const {
    object(root, "$", {"schema", "device", "generated", "entries"});
    DispatchTable t;
    // The schema first: a table of another version is refused for that, not for its keys.
    t.schema = string(root["schema"], "$.schema");
    if (t.schema != kDispatchSchema)
      fail("$.schema", "'" + t.schema + "' is not supported (this build reads " +
                           std::string(kDispatchSchema) + ")");
    const json& d = object(root["device"], "$.device", {"backend", "name", "fingerprint"});
    const std::string backend = string(d["backend"], "$.device.backend");
    try {
      t.device.backend = parse_enum<Backend>(backend);
    } catch (const InputError&) {
      fail("$.device.backend", "'" + backend + "' must be cpu or cuda");
    }
    t.device.name = string(d["name"], "$.device.name");
    t.device.fingerprint = string(d["fingerprint"], "$.device.fingerprint");
    const json& g = object(root["generated"], "$.generated",
                           {"version", "git_revision", "source_database", "time"});
    t.generated.version = string(g["version"], "$.generated.version");
    t.generated.git_revision = string(g["git_revision"], "$.generated.git_revision");
    t.generated.source_database = string(g["source_database"], "$.generated.source_database");
    t.generated.time = string(g["time"], "$.generated.time");
    const json& entries = root["entries"];
    if (!entries.is_array()) fail("$.entries", "expected an array, got " + type_of(entries));
    t.entries.reserve(entries.size());
    for (std::size_t i = 0; i < entries.size(); ++i)
      t.entries.push_back(entry(entries[i], "$.entries[" + std::to_string(i) + "]"));
    return t;
  }

 private:
  std::string origin_;
};

// ---- Writing.

ordered params_json(const Params& params) {
  ordered out = ordered::object();
  for (const auto& param : params)  // not a structured binding: clang 14 cannot capture one
    std::visit([&out, &param](const auto& x) { out[param.first] = x; }, param.second);
  return out;
}

ordered interval_json(const Interval& iv) {
  ordered out = ordered::array();
  out.push_back(iv.lo);
  if (iv.hi)
    out.push_back(*iv.hi);
  else
    out.push_back(nullptr);
  return out;
}

}  // namespace

namespace {

// The first key that appears twice in one object of valid JSON text, with its line; nlohmann
// keeps the last silently, so a table with two "schema" keys would load as the second.
// Keys compare as written (escapes undecoded).
std::optional<std::pair<std::string, int>> duplicate_key(std::string_view text) {
  struct Frame {
    bool object = false, expect_key = false;
    std::set<std::string_view> keys;
  };
  std::vector<Frame> stack;
  int line = 1;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') {
      ++line;
    } else if (c == '{' || c == '[') {
      stack.push_back({c == '{', c == '{', {}});
    } else if ((c == '}' || c == ']') && !stack.empty()) {
      stack.pop_back();
    } else if (c == ',' && !stack.empty() && stack.back().object) {
      stack.back().expect_key = true;
    } else if (c == '"') {
      const std::size_t start = i + 1;
      for (++i; i < text.size() && text[i] != '"'; ++i)
        if (text[i] == '\\') ++i;
      if (!stack.empty() && stack.back().object && stack.back().expect_key) {
        const std::string_view key = text.substr(start, i - start);
        if (!stack.back().keys.insert(key).second) return std::pair{std::string(key), line};
        stack.back().expect_key = false;
      }
    }
  }
  return std::nullopt;
}

}  // namespace

DispatchTable parse_table(std::string_view json_text, std::string_view origin) {
  const Reader reader(origin);
  json root;
  try {
    root = json::parse(json_text.begin(), json_text.end());
  } catch (const json::parse_error& e) {
    input_error(origin, ":", mactune::detail::json_error_text(json_text, e.byte, e.what()),
                " (the dispatch table is not valid JSON)");
  } catch (const json::exception& e) {
    input_error(origin, ":",
                mactune::detail::json_error_text(json_text, std::string_view::npos, e.what()),
                " (the dispatch table is not valid JSON)");
  }
  if (const auto dup = duplicate_key(json_text))
    reader.fail("line " + std::to_string(dup->second),
                "duplicate key '" + dup->first + "' (each key appears once in an object)");
  DispatchTable t = reader.table(root);
  if (std::string why = check_structure(t); !why.empty()) reader.fail("$", why);
  return t;
}

DispatchTable read_table(const std::filesystem::path& path) {
  return parse_table(read_input_file(path.string(), "dispatch table", max_table_bytes),
                     path.string());
}

std::string to_json(const DispatchTable& t) {
  ordered root = ordered::object();
  root["schema"] = t.schema;
  root["device"] = {{"backend", std::string(name_of(t.device.backend))},
                    {"name", t.device.name},
                    {"fingerprint", t.device.fingerprint}};
  root["generated"] = {{"version", t.generated.version},
                       {"git_revision", t.generated.git_revision},
                       {"source_database", t.generated.source_database},
                       {"time", t.generated.time}};
  ordered entries = ordered::array();
  for (const Entry& e : t.entries) {
    ordered j = ordered::object();
    j["shape"] = {{"head_dim", e.shape.head_dim},
                  {"q_heads", e.shape.q_heads},
                  {"kv_heads", e.shape.kv_heads},
                  {"dtype", std::string(dtype_name(e.shape.kv_dtype))},
                  {"page_size", e.shape.page_size}};
    j["batch"] = interval_json(e.batch);
    j["context"] = interval_json(e.context);
    j["full"] = {{"instance", e.full.instance}, {"params", params_json(e.full.params)}};
    if (e.mac) {
      ordered m = ordered::object();
      m["instance"] = e.mac->instance;
      m["K"] = e.mac->ring_capacity;
      m["r"] = e.mac->band;
      if (e.mac->tau) m["tau"] = *e.mac->tau;
      m["params"] = params_json(e.mac->params);
      j["mac"] = std::move(m);
    } else {
      j["mac"] = nullptr;
    }
    j["min_hit_rate"] = e.min_hit_rate ? ordered(*e.min_hit_rate) : ordered(nullptr);
    if (!e.note.empty()) j["note"] = e.note;
    entries.push_back(std::move(j));
  }
  root["entries"] = std::move(entries);
  // Invalid UTF-8 in a string (a device name) is replaced rather than thrown on.
  return root.dump(2, ' ', false, ordered::error_handler_t::replace) + "\n";
}

void write_table(const DispatchTable& t, const std::filesystem::path& path) {
  const std::string why = check_structure(t);
  MACTUNE_REQUIRE(why.empty(), "refusing to write dispatch table '", path.string(), "': ", why);
  const std::string text = to_json(t);
  // Write beside the target and rename: a reader never sees half a table.
  detail::write_atomically(path, text, "dispatch table");
}

}  // namespace mactune::dispatch
