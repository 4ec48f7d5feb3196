// Per-layer schedules: YAML in, YAML out. See schedule.h for the format.
#include "replay/schedule.h"

#include <yaml-cpp/yaml.h>

#include <charconv>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

#include "kernels/error.h"
#include "kernels/fields.h"
#include "kernels/file_io.h"
#include "kernels/one_line.h"
#include "kernels/yaml_strict.h"

namespace mactune::replay {

const MacParams& LayerSchedule::for_layer(int layer) const {
  if (const auto it = layers.find(layer); it != layers.end()) return it->second;
  if (fallback) return *fallback;
  input_error("the schedule has no entry for layer ", layer, " and no default");
}

namespace {

constexpr const char* kFormat = "mactune-layer-schedule";
constexpr int kVersion = 1;

// Reads one YAML node with "<source>:<line>: <key>: ..." errors.
struct Reader {
  const std::string& source;

  std::string at(const YAML::Node& n) const {
    return source + ":" + std::to_string(n.Mark().line + 1);
  }
  [[noreturn]] void fail(const YAML::Node& n, const std::string& what) const {
    input_error(at(n), ": ", what);
  }
  void require_map(const YAML::Node& n, const std::string& what) const {
    if (!n.IsMap()) fail(n, what + " must be a mapping");
  }
  void only_keys(const YAML::Node& n, std::initializer_list<const char*> keys,
                 const std::string& what) const {
    for (const auto& kv : n) {
      const std::string k = kv.first.as<std::string>();
      bool known = false;
      for (const char* allowed : keys) known = known || k == allowed;
      if (!known) {
        std::string list;
        for (const char* allowed : keys) list += (list.empty() ? "" : ", ") + std::string(allowed);
        fail(kv.first, "unknown key '" + k + "' in " + what + " (expected " + list + ")");
      }
    }
  }
  template <class T>
  T get(const YAML::Node& n, const std::string& key, const char* type) const {
    if (!n.IsScalar()) fail(n, key + " must be " + type);
    try {
      return n.as<T>();
    } catch (const YAML::Exception&) {
      fail(n, key + " = '" + n.Scalar() + "' is not " + type);
    }
  }
  template <class F>
  auto parse(const YAML::Node& n, const std::string& key, F&& f) const {
    try {
      return f(get<std::string>(n, key, "a string"));
    } catch (const InputError& e) {
      fail(n, key + ": " + e.what());
    }
  }

  // MacParams from a mapping, starting from `base`: every key a row of MacParams' field table
  // (kernels/fields.h: the names, types, ranges and choices of specs and tables); `extra` keys
  // are allowed (and skipped).
  MacParams mac(const YAML::Node& n, MacParams base, std::initializer_list<const char*> extra,
                const std::string& what) const {
    require_map(n, what);
    for (const auto& kv : n) {
      const std::string k = kv.first.as<std::string>();
      const YAML::Node& v = kv.second;
      bool is_extra = false;
      for (const char* e : extra) is_extra = is_extra || k == e;
      if (is_extra) continue;
      const Field<MacParams>* f = find_field<MacParams>(k);
      if (f == nullptr) {
        std::string names;
        for (const Field<MacParams>& row : fields_of<MacParams>())
          names += (names.empty() ? "" : ", ") + std::string(row.name);
        fail(kv.first, "unknown key '" + k + "' in " + what + " (expected " + names + ")");
      }
      if (!v.IsScalar()) fail(v, k + " must be a single value");
      try {
        f->assign(base, v.Scalar());
      } catch (const InputError& e) {
        fail(v, e.what());  // "K: expected a number, got 'many'"
      }
    }
    if (const std::string why = validate(base); !why.empty()) fail(n, what + ": " + why);
    return base;
  }
};

}  // namespace

static LayerSchedule parse_layer_schedule_checked(const std::string& text,
                                                  const std::string& source);

LayerSchedule parse_layer_schedule(const std::string& text, const std::string& source) {
  try {
    return parse_layer_schedule_checked(text, source);
  } catch (const YAML::Exception& e) {  // a key or value of a shape the checks did not foresee
    input_error(source, ":", e.mark.line + 1, ": ", e.msg);
  }
}

static LayerSchedule parse_layer_schedule_checked(const std::string& text,
                                                  const std::string& source) {
  // The spec reader's strictness (kernels/yaml_strict.h): no NUL, no quoted value left open,
  // one document, no key twice in a mapping.
  if (const auto p = yaml_strict::yaml_text_problem(text))
    input_error(source, ":", p->line, ": not valid YAML: ", detail::one_line(p->what));
  YAML::Node root;
  try {
    // One document: a second one is found in the text (yaml-cpp 0.7's LoadAll loops forever
    // on some malformed inputs), and Load reads the first.
    if (const int second = yaml_strict::second_document_line(text); second > 0)
      input_error(source, ":", second,
                  ": a second YAML document (after '---'); a layer schedule is one document");
    root = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    input_error(source, ":", e.mark.line + 1, ": not valid YAML: ", e.msg);
  }
  if (const auto p = yaml_strict::duplicate_key(root))
    input_error(source, ":", p->line, ": ", detail::one_line(p->what));
  const Reader rd{source};
  if (!root.IsMap()) input_error(source, ": a layer schedule must be a YAML mapping");
  rd.only_keys(root, {"format", "version", "calibration", "default", "layers"}, "the schedule");
  if (!root["format"] || rd.get<std::string>(root["format"], "format", "a string") != kFormat)
    input_error(source, ": not a layer schedule (expected 'format: ", kFormat, "')");
  if (!root["version"] || rd.get<int>(root["version"], "version", "an integer") != kVersion)
    input_error(source, ": unsupported schedule version (this build reads version ", kVersion, ")");

  LayerSchedule s;
  if (const YAML::Node c = root["calibration"]) {
    rd.require_map(c, "calibration");
    rd.only_keys(c, {"metric", "max_err", "engine", "kv_dtype", "traces"}, "calibration");
    ScheduleProvenance p;
    if (c["metric"]) p.metric = rd.get<std::string>(c["metric"], "metric", "a string");
    if (c["max_err"]) p.max_err = rd.get<double>(c["max_err"], "max_err", "a number");
    if (c["engine"]) p.engine = rd.get<std::string>(c["engine"], "engine", "a string");
    if (c["kv_dtype"]) p.kv_dtype = rd.get<std::string>(c["kv_dtype"], "kv_dtype", "a string");
    if (const YAML::Node ts = c["traces"]) {
      if (!ts.IsSequence()) rd.fail(ts, "calibration.traces must be a list");
      for (const YAML::Node& t : ts) {
        rd.require_map(t, "a calibration trace");
        rd.only_keys(t, {"name", "sha256"}, "a calibration trace");
        p.traces.push_back(
            {t["name"] ? rd.get<std::string>(t["name"], "name", "a string") : "",
             t["sha256"] ? rd.get<std::string>(t["sha256"], "sha256", "a string") : ""});
      }
    }
    s.provenance = p;
  }
  if (const YAML::Node d = root["default"]) s.fallback = rd.mac(d, MacParams{}, {}, "default");
  const YAML::Node layers = root["layers"];
  if (!layers || !layers.IsSequence())
    input_error(source, ": 'layers' must be a list of per-layer settings");
  for (const YAML::Node& e : layers) {
    rd.require_map(e, "a layer entry");
    if (!e["layer"]) rd.fail(e, "a layer entry has no 'layer'");
    const int layer = rd.get<int>(e["layer"], "layer", "an integer");
    if (layer < 0) rd.fail(e["layer"], "layer = " + std::to_string(layer) + " must be >= 0");
    if (s.layers.count(layer)) rd.fail(e, "layer " + std::to_string(layer) + " is listed twice");
    const MacParams base = s.fallback ? *s.fallback : MacParams{};
    s.layers[layer] = rd.mac(e, base, {"layer", "measured"}, "layer " + std::to_string(layer));
    if (const YAML::Node m = e["measured"]) {
      rd.require_map(m, "measured");
      for (const auto& kv : m)
        s.measured[layer][kv.first.as<std::string>()] =
            rd.get<double>(kv.second, kv.first.as<std::string>(), "a number");
    }
  }
  return s;
}

LayerSchedule load_layer_schedule(const std::string& path) {
  // A schedule is a few lines per layer: 16 MiB is far past any real one.
  return parse_layer_schedule(read_input_file(path, "layer schedule", 16u << 20), path);
}

namespace {

std::string num(double x) {  // shortest text that reads back to the same double
  char buf[32];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, x);
  std::string s(buf, end);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";  // keep it a float in YAML
  return s;
}

std::string quoted(const std::string& s) {  // a YAML double-quoted scalar
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

// Every row of MacParams' field table, in table order, as the reader takes it back.
void write_mac(std::ostream& o, const MacParams& p, const char* indent) {
  for (const Field<MacParams>& f : fields_of<MacParams>()) {
    const Scalar v = f.get(p);
    o << indent << f.name << ": "
      << (std::holds_alternative<double>(v) ? num(std::get<double>(v)) : f.text(v)) << "\n";
  }
}

}  // namespace

std::string layer_schedule_yaml(const LayerSchedule& s, const std::string& header_comment) {
  std::ostringstream o;
  std::istringstream lines(header_comment);
  for (std::string line; std::getline(lines, line);) o << "# " << line << "\n";
  o << "format: " << kFormat << "\nversion: " << kVersion << "\n";
  if (s.provenance) {
    const ScheduleProvenance& p = *s.provenance;
    o << "calibration:\n  metric: " << quoted(p.metric) << "\n  max_err: " << num(p.max_err)
      << "\n  engine: " << quoted(p.engine) << "\n  kv_dtype: " << quoted(p.kv_dtype)
      << "\n  traces:\n";
    for (const ScheduleTrace& t : p.traces)
      o << "    - name: " << quoted(t.name) << "\n      sha256: " << quoted(t.sha256) << "\n";
  }
  if (s.fallback) {
    o << "default:\n";
    write_mac(o, *s.fallback, "  ");
  }
  o << "layers:\n";
  for (const auto& [layer, p] : s.layers) {
    o << "  - layer: " << layer << "\n";
    write_mac(o, p, "    ");
    if (const auto it = s.measured.find(layer); it != s.measured.end() && !it->second.empty()) {
      o << "    measured:\n";
      for (const auto& [k, v] : it->second) o << "      " << k << ": " << num(v) << "\n";
    }
  }
  return o.str();
}

void save_layer_schedule(const std::string& path, const LayerSchedule& s,
                         const std::string& header_comment) {
  write_file_atomically(path, layer_schedule_yaml(s, header_comment), "schedule");
}

}  // namespace mactune::replay
