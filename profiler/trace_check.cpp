#include "profiler/trace_check.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <tuple>

#include "kernels/error.h"

namespace mactune::prof {
namespace {

using json = nlohmann::json;
using Track = std::pair<long long, long long>;  // (pid, tid)

struct XSpan {
  long long start, end;  // ns
  std::string name, cat;
};

struct FlowEnd {
  std::string key;  // id|cat|name
  Track track;
  long long ts;
  std::size_t index;
};

long long to_ns(double us) {
  return std::llround(us * 1000.0);
}

class Checker {
 public:
  explicit Checker(TraceCheck& r) : r_(r) {}

  void error(std::size_t i, const std::string& what) {
    if (r_.errors.size() < 200)
      r_.errors.push_back("event " + std::to_string(i) + ": " + what);
    else if (r_.errors.size() == 200)
      r_.errors.push_back("... more errors not listed");
  }

  bool need(const json& e, std::size_t i, const char* key, bool (json::*is)() const,
            const char* type) {
    auto it = e.find(key);
    if (it == e.end()) {
      error(i, std::string("missing \"") + key + "\" (" + e.value("ph", "?") + " event)");
      return false;
    }
    if (!((*it).*is)()) {
      error(i, std::string("\"") + key + "\" must be " + type);
      return false;
    }
    return true;
  }

  void event(const json& e, std::size_t i) {
    if (!e.is_object()) return error(i, "not an object");
    if (!need(e, i, "ph", &json::is_string, "a string")) return;
    const std::string ph = e["ph"];
    if (ph == "M") return metadata(e, i);
    bool ok = need(e, i, "ts", &json::is_number, "a number");
    ok = need(e, i, "pid", &json::is_number_integer, "an integer") && ok;
    if (ph != "C") ok = need(e, i, "tid", &json::is_number_integer, "an integer") && ok;
    if (ph != "E") ok = need(e, i, "name", &json::is_string, "a string") && ok;
    if (!ok) return;
    const double ts = e["ts"];
    if (!std::isfinite(ts) || ts < 0) return error(i, "\"ts\" must be finite and >= 0");
    const long long pid = e["pid"];
    const Track track{pid, e.value("tid", 0LL)};
    used_pids_.insert(pid);
    if (ph == "X") {
      if (!need(e, i, "dur", &json::is_number, "a number")) return;
      const double dur = e["dur"];
      if (!std::isfinite(dur) || dur < 0) return error(i, "\"dur\" must be finite and >= 0");
      spans_[track].push_back(
          {to_ns(ts), to_ns(ts) + to_ns(dur), e["name"], e.value("cat", std::string())});
      ++r_.spans;
    } else if (ph == "B" || ph == "E") {
      auto& stack = open_[track];
      if (ph == "B") {
        stack.push_back({to_ns(ts), 0, e["name"], e.value("cat", std::string())});
      } else if (stack.empty()) {
        error(i, "\"E\" without an open \"B\" on its track");
      } else {
        XSpan s = stack.back();
        stack.pop_back();
        s.end = to_ns(ts);
        if (s.end < s.start) error(i, "\"E\" before its \"B\"");
        spans_[track].push_back(s);
        ++r_.spans;
      }
    } else if (ph == "s" || ph == "t" || ph == "f") {
      if (!need(e, i, "cat", &json::is_string, "a string")) return;
      auto id = e.find("id");
      if (id == e.end() || !(id->is_number_integer() || id->is_string()))
        return error(i, "flow event needs an integer or string \"id\"");
      if (ph == "f" && e.value("bp", std::string()) != "e")
        error(i, "flow end without \"bp\":\"e\" binds to the next slice, not the kernel");
      const std::string key =
          id->dump() + "|" + e["cat"].get<std::string>() + "|" + e["name"].get<std::string>();
      (ph == "s" ? flow_starts_ : flow_ends_).push_back({key, track, to_ns(ts), i});
      if (ph == "s") ++r_.flows;
    } else if (ph == "C") {
      auto args = e.find("args");
      if (args == e.end() || !args->is_object() || args->empty())
        return error(i, "counter needs a non-empty \"args\" object");
      for (const auto& [k, v] : args->items())
        if (!v.is_number()) error(i, "counter series \"" + k + "\" is not a number");
    } else if (ph == "i" || ph == "I") {
      const std::string s = e.value("s", std::string("t"));
      if (s != "g" && s != "p" && s != "t") error(i, "instant scope must be g, p or t");
    } else {
      error(i, "unsupported phase \"" + ph + "\"");
    }
  }

  void metadata(const json& e, std::size_t i) {
    if (!need(e, i, "name", &json::is_string, "a string") ||
        !need(e, i, "pid", &json::is_number_integer, "an integer") ||
        !need(e, i, "args", &json::is_object, "an object"))
      return;
    const std::string name = e["name"];
    const long long pid = e["pid"];
    const auto& args = e["args"];
    if (name == "process_name" || name == "thread_name") {
      if (!args.contains("name") || !args["name"].is_string() ||
          args["name"].get<std::string>().empty())
        return error(i, name + " needs a non-empty args.name");
      if (name == "process_name") {
        named_pids_.insert(pid);
      } else {
        if (!need(e, i, "tid", &json::is_number_integer, "an integer")) return;
        named_threads_.insert({pid, e["tid"].get<long long>()});
      }
    } else if (name == "process_sort_index" || name == "thread_sort_index") {
      if (!args.contains("sort_index") || !args["sort_index"].is_number_integer())
        error(i, name + " needs an integer args.sort_index");
    } else if (name != "process_labels") {
      error(i, "unknown metadata \"" + name + "\"");
    }
  }

  void finish(const TraceCheckOptions& opt) {
    for (const auto& [track, open] : open_)
      if (!open.empty())
        r_.errors.push_back("track " + str(track) + ": " + std::to_string(open.size()) +
                            " \"B\" events never closed");
    for (auto& [track, v] : spans_) {
      std::sort(v.begin(), v.end(), [](const XSpan& a, const XSpan& b) {
        return std::tie(a.start, b.end) < std::tie(b.start, a.end);
      });
      std::vector<const XSpan*> stack;
      for (const XSpan& s : v) {
        while (!stack.empty() && stack.back()->end <= s.start) stack.pop_back();
        if (!stack.empty() && s.end > stack.back()->end)
          r_.errors.push_back("track " + str(track) + ": \"" + s.name + "\" at " +
                              std::to_string(s.start) + " ns overlaps \"" + stack.back()->name +
                              "\" without nesting in it");
        stack.push_back(&s);
      }
      if (!named_threads_.count(track))
        r_.errors.push_back("track " + str(track) + " has spans but no thread_name");
    }
    for (long long pid : used_pids_)
      if (!named_pids_.count(pid))
        r_.errors.push_back("process " + std::to_string(pid) + " has events but no process_name");
    r_.tracks = static_cast<int>(spans_.size());
    check_flows();
    check_steps(opt);
  }

 private:
  static std::string str(const Track& t) {
    return "(pid " + std::to_string(t.first) + ", tid " + std::to_string(t.second) + ")";
  }

  bool on_span(const Track& track, long long ts) const {
    auto it = spans_.find(track);
    if (it == spans_.end()) return false;
    return std::any_of(it->second.begin(), it->second.end(),
                       [&](const XSpan& s) { return s.start <= ts && ts <= s.end; });
  }

  void check_flows() {
    std::map<std::string, const FlowEnd*> starts;
    for (const auto& s : flow_starts_) {
      if (!starts.emplace(s.key, &s).second) error(s.index, "flow id reused: " + s.key);
      if (!on_span(s.track, s.ts))
        error(s.index, "flow start lies on no span of track " + str(s.track));
    }
    for (const auto& f : flow_ends_) {
      auto it = starts.find(f.key);
      if (it == starts.end()) {
        error(f.index, "flow end " + f.key + " has no start");
        continue;
      }
      if (f.ts < it->second->ts) error(f.index, "flow " + f.key + " ends before it starts");
      if (!on_span(f.track, f.ts))
        error(f.index, "flow end lies on no span of track " + str(f.track));
    }
  }

  void check_steps(const TraceCheckOptions& opt) {
    std::vector<std::pair<long long, XSpan>> steps;  // (pid, span)
    for (const auto& [track, v] : spans_)
      for (const auto& s : v)
        if (s.cat == "step") steps.push_back({track.first, s});
    r_.steps = static_cast<int>(steps.size());
    if (r_.steps < opt.min_steps)
      r_.errors.push_back("expected at least " + std::to_string(opt.min_steps) +
                          " step spans, found " + std::to_string(r_.steps));
    auto present = [&](long long pid, const XSpan& step, const std::string& phase) {
      for (const auto& [track, v] : spans_) {
        if (track.first != pid) continue;
        for (const auto& s : v)
          if (s.cat == "phase" && s.name == phase && s.start >= step.start && s.end <= step.end)
            return true;
      }
      return false;
    };
    std::vector<std::string> required = opt.phases_every_step;
    for (const auto& p : opt.phases_where_present) {
      bool anywhere = false;
      for (const auto& [pid, step] : steps) anywhere = anywhere || present(pid, step, p);
      if (anywhere) required.push_back(p);
    }
    for (const auto& [pid, step] : steps)
      for (const auto& p : required)
        if (!present(pid, step, p))
          r_.errors.push_back("step \"" + step.name + "\" at " + std::to_string(step.start) +
                              " ns has no \"" + p + "\" phase span");
  }

  TraceCheck& r_;
  std::map<Track, std::vector<XSpan>> spans_, open_;
  std::vector<FlowEnd> flow_starts_, flow_ends_;
  std::set<long long> named_pids_, used_pids_;
  std::set<Track> named_threads_;
};

}  // namespace

std::string TraceCheck::summary() const {
  std::ostringstream out;
  for (std::size_t i = 0; i < errors.size() && i < 5; ++i) out << errors[i] << '\n';
  if (errors.size() > 5) out << "(" << errors.size() - 5 << " more)\n";
  return out.str();
}

TraceCheck check_chrome_trace(std::string_view text, const TraceCheckOptions& options) {
  TraceCheck r;
  json doc = json::parse(text.begin(), text.end(), nullptr, false);
  if (doc.is_discarded()) {
    r.errors.push_back("not valid JSON");
    return r;
  }
  const json* events = &doc;
  if (doc.is_object()) {
    auto it = doc.find("traceEvents");
    if (it == doc.end() || !it->is_array()) {
      r.errors.push_back("object without a \"traceEvents\" array");
      return r;
    }
    events = &*it;
    auto unit = doc.find("displayTimeUnit");
    if (unit != doc.end() && !(unit->is_string() && (*unit == "ms" || *unit == "ns")))
      r.errors.push_back("displayTimeUnit must be \"ms\" or \"ns\"");
  } else if (!doc.is_array()) {
    r.errors.push_back("neither an object nor an array of events");
    return r;
  }
  Checker c(r);
  std::size_t i = 0;
  for (const auto& e : *events) c.event(e, i++);
  r.events = static_cast<int>(i);
  c.finish(options);
  return r;
}

TraceCheck check_chrome_trace_file(const std::string& path, const TraceCheckOptions& options) {
  std::ifstream in(path, std::ios::binary);
  MACTUNE_REQUIRE(in.good(), "cannot read trace '", path, "'");
  std::ostringstream text;
  text << in.rdbuf();
  return check_chrome_trace(text.str(), options);
}

}  // namespace mactune::prof
