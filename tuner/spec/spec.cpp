// YAML -> Spec. Every error names FILE:LINE: KEY (yaml-cpp marks carry 0-based lines).
#include "tuner/spec/spec.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "kernels/error.h"
#include "kernels/file_io.h"
#include "kernels/one_line.h"
#include "tuner/spec/axes.h"
#include "tuner/spec/skip_ratio.h"
#include "tuner/spec/spec_yaml.h"

namespace mactune::tuner {

const Axis* Spec::find_axis(std::string_view axis_name) const {
  for (const Axis& a : axes)
    if (a.name == axis_name) return &a;
  return nullptr;
}

const Axis& Spec::axis(std::string_view axis_name) const {
  const Axis* a = find_axis(axis_name);
  MACTUNE_CHECK(a != nullptr, "spec has no axis '", axis_name, "'");
  return *a;
}

bool glob_match(std::string_view p, std::string_view t) {
  std::size_t pi = 0, ti = 0, star = std::string_view::npos, mark = 0;
  while (ti < t.size()) {
    if (pi < p.size() && (p[pi] == '?' || p[pi] == t[ti])) {
      ++pi;
      ++ti;
    } else if (pi < p.size() && p[pi] == '*') {
      star = pi++;
      mark = ti;
    } else if (star != std::string_view::npos) {
      pi = star + 1;
      ti = ++mark;
    } else {
      return false;
    }
  }
  while (pi < p.size() && p[pi] == '*') ++pi;
  return pi == p.size();
}

namespace {

// Where we are while reading: the file, for messages.
struct Reader {
  std::string file;

  int line_of(const YAML::Node& n) const {
    const int l = n.Mark().line;
    return l >= 0 ? l + 1 : 0;
  }
  template <class... Parts>
  [[noreturn]] void fail(int line, std::string_view key, const Parts&... parts) const {
    // One line whatever the spec quotes back (a key or value may hold a newline).
    spec_error(file, ':', line, ": ", key, ": ", parts...);
  }
  template <class... Parts>
  [[noreturn]] void fail(const YAML::Node& n, std::string_view key, const Parts&... parts) const {
    fail(line_of(n), key, parts...);
  }

  // A key as text: keys are plain names (a YAML key may be a list or a mapping, `? [a]: 1`).
  std::string key_text(const YAML::Node& k, std::string_view where) const {
    if (!k.IsScalar())
      fail(k, where.empty() ? "spec" : where, "expected a plain key, got a ",
           k.IsSequence() ? "list" : "mapping");
    return k.Scalar();
  }

  // A mapping whose keys must all be in `known`; returns (key, key line, value) in file order.
  struct Entry {
    std::string key;
    int line;
    YAML::Node value;
  };
  std::vector<Entry> mapping(const YAML::Node& n, std::string_view where,
                             std::initializer_list<std::string_view> known) const {
    return mapping(n, where, std::vector<std::string_view>(known));
  }
  std::vector<Entry> mapping(const YAML::Node& n, std::string_view where,
                             const std::vector<std::string_view>& known) const {
    if (!n.IsMap()) fail(n, where, "expected a mapping of keys");
    std::vector<Entry> out;
    for (auto it = n.begin(); it != n.end(); ++it) {
      const std::string key = key_text(it->first, where);
      const std::string full = where.empty() ? key : std::string(where) + "." + key;
      if (std::find(known.begin(), known.end(), key) == known.end()) {
        std::ostringstream k;
        for (auto s : known) k << (k.tellp() ? ", " : "") << s;
        fail(it->first, full, "unknown key (expected one of: ", k.str(), ")");
      }
      out.push_back({key, line_of(it->first), it->second});
    }
    return out;
  }

  std::string scalar(const YAML::Node& n, std::string_view key) const {
    if (!n.IsScalar()) fail(n, key, "expected a single value");
    return n.Scalar();
  }
  // `at`: where to report a problem when `n` was generated (a pow2 or range item has no line).
  double number(const YAML::Node& n, std::string_view key, const YAML::Node* at = nullptr) const {
    const std::string s = scalar(n, key);
    const auto v = parse_real(s);
    if (!v) fail(at ? *at : n, key, "expected a number, got '", s, "'");
    return *v;
  }
  long long integer(const YAML::Node& n, std::string_view key,
                    const YAML::Node* at = nullptr) const {
    const double v = number(n, key, at);
    if (v != std::floor(v) || std::fabs(v) > 9e15)
      fail(at ? *at : n, key, "expected an integer, got '", n.Scalar(), "'");
    return static_cast<long long>(v);
  }
};

// One value of an axis from its scalar text, read and checked by the axis's field. `at`: where
// a generated item (pow2, range) came from, for messages.
Value axis_value(const Reader& rd, const AxisDef& def, const YAML::Node& n, const std::string& key,
                 const YAML::Node* at = nullptr) {
  const std::string s = rd.scalar(n, key);
  Value v;
  try {
    v.value = def.field.parse(s);
  } catch (const InputError& e) {
    rd.fail(at ? *at : n, key, e.what());
  }
  v.text = def.field.text(v.value);
  v.num = number_of(v.value).value_or(0.0);
  return v;
}

// The values of one axis: a scalar, a list, {pow2: [lo, hi]} or {range: [lo, hi, step]}.
std::vector<Value> axis_values(const Reader& rd, const AxisDef& def, const YAML::Node& n,
                               const std::string& key) {
  std::vector<Value> out;
  if (n.IsScalar()) {
    out.push_back(axis_value(rd, def, n, key));
  } else if (n.IsSequence()) {
    for (const auto& item : n) out.push_back(axis_value(rd, def, item, key));
  } else if (n.IsMap()) {
    if (def.field.type != FieldType::integer && def.field.type != FieldType::real)
      rd.fail(n, key, "expected a value or a list of values");
    const auto entries = rd.mapping(n, key, {"pow2", "range"});
    if (entries.size() != 1) rd.fail(n, key, "expected exactly one of pow2 or range");
    const auto& e = entries[0];
    const std::string k = key + "." + e.key;
    if (!e.value.IsSequence() || e.value.size() < 2 || e.value.size() > 3 ||
        (e.key == "pow2" && e.value.size() != 2))
      rd.fail(e.value, k,
              e.key == "pow2" ? "expected [lo, hi]" : "expected [lo, hi] or [lo, hi, step]");
    const double lo = rd.number(e.value[0], k), hi = rd.number(e.value[1], k);
    // Bounds outside the axis's range are refused before any value is generated: a range to
    // 1e18 would otherwise make values no axis accepts (or too many to hold).
    if (!def.field.bounds.holds(lo) || !def.field.bounds.holds(hi))
      rd.fail(e.value, k, "[", e.value[0].Scalar(), ", ", e.value[1].Scalar(),
              "] is outside the range of ", key, ": ", def.field.name, " ",
              def.field.bounds.requirement());
    if (e.key == "pow2") {
      if (lo < 1 || hi < lo) rd.fail(e.value, k, "expected 1 <= lo <= hi");
      for (double x = std::exp2(std::ceil(std::log2(lo))); x <= hi; x *= 2) {
        YAML::Node item(static_cast<long long>(x));
        out.push_back(axis_value(rd, def, item, k, &e.value));
      }
    } else {
      const double step = e.value.size() == 3 ? rd.number(e.value[2], k) : 1.0;
      if (!(step > 0)) rd.fail(e.value, k, "step must be positive");
      if (hi < lo) rd.fail(e.value, k, "expected lo <= hi");
      const double count = std::floor((hi - lo) / step + 1e-9) + 1;
      if (count > 100000)
        rd.fail(e.value, k, "the range has ", format_number(count), " values (at most 100000)");
      const auto n_values = static_cast<long long>(count);
      for (long long i = 0; i < n_values; ++i) {
        YAML::Node item(format_number(lo + static_cast<double>(i) * step));
        out.push_back(axis_value(rd, def, item, k, &e.value));
      }
    }
  } else {
    rd.fail(n, key, "expected a value or a list of values");
  }
  if (out.empty()) rd.fail(n, key, "empty list: an axis needs at least one value");
  return out;
}

void read_axes(const Reader& rd, Spec& spec, Section section, const YAML::Node& n,
               const std::string& where) {
  std::vector<std::string_view> known;
  for (const AxisDef& d : axis_defs())
    if (d.section == section) known.push_back(d.name());
  if (!n.IsMap()) rd.fail(n, where, "expected a mapping of axes");
  for (auto it = n.begin(); it != n.end(); ++it) {
    std::string key = rd.key_text(it->first, where);
    for (const AxisDef& d : axis_defs())  // an earlier spelling (the field's alias) is the axis
      if (d.section == section && d.field.named(key)) key = std::string(d.name());
    const std::string full = where + "." + key;
    auto found = std::find_if(spec.axes.begin(), spec.axes.end(),
                              [&](const Axis& a) { return a.section == section && a.name == key; });
    if (found == spec.axes.end()) {
      std::ostringstream k;
      for (auto s : known) k << (k.tellp() ? ", " : "") << s;
      rd.fail(it->first, full, "unknown key (expected one of: ", k.str(), ")");
    }
    if (found->given) rd.fail(it->first, full, "given twice");
    found->values = axis_values(rd, *find_axis_def(section, key), it->second, full);
    found->line = rd.line_of(it->first);
    found->given = true;
  }
}

// One key of a policy section, read and checked by its table row. A number outside the row's
// range says the range, as an axis's bounds do ("must be in [1, 1000000], got 0").
template <class S>
void read_field(const Reader& rd, const Field<S>& f, S& s, const YAML::Node& n,
                const std::string& key) {
  const std::string text = rd.scalar(n, key);
  try {
    f.set(s, f.parse(text));
  } catch (const FieldError& e) {
    if (e.failed == FieldCheck::range)
      rd.fail(n, key, f.bounds.requirement(f.type == FieldType::integer), ", got ", text);
    rd.fail(n, key, e.what());
  }
}

// A policy section (`measure`, `search`, `decide`) through the table of its struct: every key
// a row (an unknown one names the rows), every value checked by its row.
template <Described S>
void read_fields(const Reader& rd, S& s, const YAML::Node& n, const std::string& where) {
  std::vector<std::string_view> known;
  for (const Field<S>& f : fields_of<S>()) known.push_back(f.name);
  for (const auto& e : rd.mapping(n, where, known))
    read_field(rd, *find_field<S>(e.key), s, e.value, where + "." + e.key);
}

void read_measure(const Reader& rd, MeasurePolicy& m, const YAML::Node& n, Backend backend) {
  read_fields(rd, m, n, "measure");
  if (m.timer && backend_of(*m.timer) != backend)
    rd.fail(n.IsMap() && n["timer"] ? n["timer"] : n, "measure.timer", name_of(*m.timer),
            " times the ", name_of(backend_of(*m.timer)), " backend, and this spec runs on ",
            name_of(backend),
            backend == Backend::cpu ? " (its timer: steady_clock)"
                                    : " (its timers: cuda_events, cupti)");
  if (m.stop.max_samples < m.stop.min_samples)
    rd.fail(n, "measure", "max_samples = ", m.stop.max_samples,
            " is below min_samples = ", m.stop.min_samples);
}

// `search: halving` or `search: {strategy: halving, first_samples: 2}`.
void read_search(const Reader& rd, Search& s, const YAML::Node& n) {
  if (n.IsScalar())
    read_field(rd, *find_field<Search>("strategy"), s, n, "search");
  else
    read_fields(rd, s, n, "search");
}

// `zip: [[q_heads, kv_heads], ...]`: axes that vary together, item by item.
void read_zip(const Reader& rd, Spec& spec, const YAML::Node& n) {
  if (!n.IsSequence())
    rd.fail(n, "zip", "expected a list of axis groups, e.g. [[q_heads, kv_heads]]");
  const bool one_group = n.size() > 0 && n[0].IsScalar();
  std::set<std::string> seen;
  auto read_group = [&](const YAML::Node& g) {
    if (!g.IsSequence() || g.size() < 2) rd.fail(g, "zip", "a group lists at least two axes");
    ZipGroup z;
    z.line = rd.line_of(g);
    for (const auto& a : g) {
      const std::string name = rd.scalar(a, "zip");
      const Axis* axis = spec.find_axis(name);
      if (!axis) rd.fail(a, "zip", "unknown axis '", name, "'");
      if (!seen.insert(name).second) rd.fail(a, "zip", "axis '", name, "' is in two groups");
      if (!z.axes.empty() && axis->values.size() != spec.axis(z.axes[0]).values.size())
        rd.fail(a, "zip", "axis '", name, "' has ", axis->values.size(), " values but '", z.axes[0],
                "' has ", spec.axis(z.axes[0]).values.size(), ": zipped axes need equal lengths");
      z.axes.push_back(name);
    }
    spec.zips.push_back(std::move(z));
  };
  if (one_group)
    read_group(n);
  else
    for (const auto& g : n) read_group(g);
}

// A value listed twice would measure the same point twice: an error, except inside a zip
// group, where only a repeated tuple is.
void check_duplicates(const Reader& rd, const Spec& spec) {
  auto tuple = [&](const std::vector<std::string>& names, std::size_t i) {
    std::string t;
    for (const auto& n : names) t += spec.axis(n).values[i].text + "|";
    return t;
  };
  std::set<std::string> zipped;
  for (const ZipGroup& z : spec.zips) {
    zipped.insert(z.axes.begin(), z.axes.end());
    std::set<std::string> seen;
    for (std::size_t i = 0; i < spec.axis(z.axes[0]).values.size(); ++i)
      if (!seen.insert(tuple(z.axes, i)).second)
        rd.fail(z.line, "zip", "the value tuple at position ", i + 1, " is listed twice");
  }
  for (const Axis& a : spec.axes) {
    if (zipped.count(a.name)) continue;
    std::set<std::string> seen;
    for (const Value& v : a.values)
      if (!seen.insert(v.text).second)
        rd.fail(a.line, std::string(name_of(a.section)) + "." + a.name, "value ", v.text,
                " is listed twice");
  }
}

void read_constraints(const Reader& rd, Spec& spec, const YAML::Node& n) {
  if (!n.IsSequence()) rd.fail(n, "constraints", "expected a list of expressions");
  std::set<std::string> names;
  for (const Axis& a : spec.axes)
    if (a.numeric()) names.insert(a.name);
  for (const auto& d : derived_names()) names.insert(d);
  for (std::size_t i = 0; i < n.size(); ++i) {
    const std::string key = "constraints[" + std::to_string(i) + "]";
    const std::string text = rd.scalar(n[i], key);
    try {
      spec.constraints.push_back({Expr::parse(text, names), rd.line_of(n[i])});
    } catch (const InputError& e) {
      rd.fail(n[i], key, e.what());
    }
  }
}

}  // namespace

BackendRequest requested_backend(std::string_view text, const std::string& file, int* line) {
  if (line) *line = 0;
  const YAML::Node root = load_spec_yaml(text, file);
  if (root.IsMap() && root["device"] && root["device"].IsMap() && root["device"]["backend"]) {
    const YAML::Node n = root["device"]["backend"];
    const int at = n.Mark().line + 1;
    if (line) *line = at;
    try {
      return parse_backend_request(n.IsScalar() ? n.Scalar() : "");
    } catch (const InputError& e) {
      spec_error(file, ':', at, ": device.backend: ", e.what());
    }
  }
  return std::nullopt;
}

std::string read_spec_file(const std::string& path) {
  return read_input_file(path, "spec", max_spec_bytes);
}

static Spec parse_spec_checked(std::string_view text, const std::string& file, Backend backend) {
  Reader rd{file};
  const YAML::Node root = load_spec_yaml(text, file);
  if (!root.IsMap()) rd.fail(root, "spec", "expected a mapping at the top level");
  Spec spec;
  spec.file = file;
  spec.backend = backend;
  spec.text = std::string(text);
  spec.axes = default_axes();
  bool have_name = false;
  const YAML::Node* zip = nullptr;
  const YAML::Node* constraints = nullptr;
  YAML::Node zip_node, constraints_node;
  for (const auto& e :
       rd.mapping(root, "",
                  {"name", "description", "device", "kernels", "mac", "workload", "zip",
                   "constraints", "measure", "search", "decide", "seed", "output"})) {
    if (e.key == "name") {
      spec.name = rd.scalar(e.value, "name");
      const bool ok =
          !spec.name.empty() && std::all_of(spec.name.begin(), spec.name.end(), [](char c) {
            return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
          });
      if (!ok) rd.fail(e.value, "name", "use letters, digits, '-', '_' and '.' only");
      // The name is one path component of every default output (results/NAME.db, slurm/NAME):
      // ".", ".." or a hidden name would write elsewhere, or out of sight.
      if (spec.name.front() == '.')
        rd.fail(e.value, "name", "'", spec.name,
                "' starts with '.': the name is a file name of its own (results/NAME.db)");

      have_name = true;
    } else if (e.key == "description") {
      spec.description = rd.scalar(e.value, "description");
    } else if (e.key == "seed") {
      spec.seed = static_cast<std::uint64_t>(rd.integer(e.value, "seed"));
    } else if (e.key == "device") {
      spec.device.line = e.line;
      for (const auto& d : rd.mapping(e.value, "device", {"backend", "name"})) {
        const std::string v = rd.scalar(d.value, "device." + d.key);
        if (d.key == "name") {
          spec.device.name = v;
          continue;
        }
        try {
          spec.device.backend = parse_backend_request(v);
        } catch (const InputError& bad) {
          rd.fail(d.value, "device.backend", bad.what());
        }
      }
    } else if (e.key == "kernels") {
      for (const auto& k : rd.mapping(e.value, "kernels", {"cpu", "cuda"})) {
        // Only the backend that runs enters the grid; the other section is still checked.
        Spec scratch;
        scratch.axes = default_axes();
        const Section s = k.key == "cpu" ? Section::cpu : Section::cuda;
        read_axes(rd, k.key == name_of(backend) ? spec : scratch, s, k.value, "kernels." + k.key);
      }
    } else if (e.key == "mac") {
      read_axes(rd, spec, Section::mac, e.value, "mac");
    } else if (e.key == "workload") {
      read_axes(rd, spec, Section::workload, e.value, "workload");
    } else if (e.key == "zip") {
      zip_node = e.value;
      zip = &zip_node;
    } else if (e.key == "constraints") {
      constraints_node = e.value;
      constraints = &constraints_node;
    } else if (e.key == "measure") {
      read_measure(rd, spec.measure, e.value, backend);
    } else if (e.key == "search") {
      read_search(rd, spec.search, e.value);
    } else if (e.key == "decide") {
      read_fields(rd, spec.decide, e.value, "decide");
    } else if (e.key == "output") {
      for (const auto& o : rd.mapping(e.value, "output", {"db", "dispatch", "header", "report"})) {
        const std::string v = rd.scalar(o.value, "output." + o.key);
        if (o.key == "db") spec.output.db = v;
        if (o.key == "dispatch") spec.output.dispatch = v;
        if (o.key == "header") spec.output.header = v;
        if (o.key == "report") spec.output.report = v;
      }
    }
  }
  if (!have_name) rd.fail(1, "name", "missing: every spec has a name (used for output files)");
  // Drop the axes of the backend that does not run.
  const Section other = backend == Backend::cuda ? Section::cpu : Section::cuda;
  std::erase_if(spec.axes, [&](const Axis& a) { return a.section == other; });
  if (zip) read_zip(rd, spec, *zip);
  check_duplicates(rd, spec);
  resolve_skip_ratio_axis(spec);  // workload.skip_ratio: its quota, and what it excludes
  if (constraints) read_constraints(rd, spec, *constraints);
  if (spec.output.db.empty()) spec.output.db = "results/" + spec.name + ".db";
  if (spec.output.dispatch.empty()) spec.output.dispatch = "dispatch/" + spec.name + ".json";
  return spec;
}

Spec parse_spec(std::string_view text, const std::string& file, Backend backend) {
  try {
    return parse_spec_checked(text, file, backend);
  } catch (const YAML::Exception& e) {
    // A shape the reader's checks did not foresee (a conversion yaml-cpp refuses): still one
    // line naming the file and line, never an internal error.
    spec_error(file, ':', e.mark.line + 1, ": ", e.msg);
  }
}

Spec load_spec(const std::string& path, Backend backend) {
  return parse_spec(read_spec_file(path), path, backend);
}

}  // namespace mactune::tuner
