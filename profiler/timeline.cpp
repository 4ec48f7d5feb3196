#include "profiler/timeline.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <ostream>
#include <tuple>

#include "kernels/error.h"
#include "kernels/file_io.h"

namespace mactune::prof {

void Timeline::name_process(int pid, std::string name, int sort_index, std::string label) {
  for (auto& p : processes_)
    if (p.pid == pid) {
      p = {pid, std::move(name), sort_index, std::move(label)};
      return;
    }
  processes_.push_back({pid, std::move(name), sort_index, std::move(label)});
}

void Timeline::name_thread(int pid, std::int64_t tid, std::string name, int sort_index) {
  for (auto& t : threads_)
    if (t.pid == pid && t.tid == tid) {
      t = {pid, tid, std::move(name), sort_index};
      return;
    }
  threads_.push_back({pid, tid, std::move(name), sort_index});
}

bool Timeline::has_thread(int pid, std::int64_t tid) const {
  return std::any_of(threads_.begin(), threads_.end(),
                     [&](const ThreadTrack& t) { return t.pid == pid && t.tid == tid; });
}

std::int64_t Timeline::origin_ns() const {
  bool any = false;
  std::int64_t t0 = 0;
  auto take = [&](std::int64_t t) {
    t0 = any ? std::min(t0, t) : t;
    any = true;
  };
  for (const auto& s : spans_) take(s.start_ns);
  for (const auto& c : counters_) take(c.ts_ns);
  for (const auto& f : flows_) take(std::min(f.from_ns, f.to_ns));
  return t0;
}

namespace {

using TrackKey = std::pair<int, std::int64_t>;

// Tids for lane tracks: above any Linux tid (pid_max <= 2^22) and any CUDA stream id we print.
constexpr std::int64_t kLaneTidBase = 1'900'000'000;

}  // namespace

int Timeline::separate_overlaps() {
  std::map<TrackKey, std::vector<std::size_t>> by_track;
  for (std::size_t i = 0; i < spans_.size(); ++i)
    by_track[{spans_[i].pid, spans_[i].tid}].push_back(i);

  std::int64_t next_lane_tid = kLaneTidBase;
  for (const auto& t : threads_) next_lane_tid = std::max(next_lane_tid, t.tid + 1);
  const std::vector<Span> original = spans_;
  int moved = 0;
  for (auto& [key, idx] : by_track) {
    std::sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) {
      const Span &x = spans_[a], &y = spans_[b];
      return std::tie(x.start_ns, y.end_ns) < std::tie(y.start_ns, x.end_ns);
    });
    std::vector<std::vector<std::int64_t>> lanes;  // per lane: stack of open span ends
    std::vector<std::int64_t> lane_tid{key.second};
    for (std::size_t i : idx) {
      Span& s = spans_[i];
      std::size_t lane = 0;
      for (;; ++lane) {
        if (lane == lanes.size()) lanes.emplace_back();
        auto& stack = lanes[lane];
        while (!stack.empty() && stack.back() <= s.start_ns) stack.pop_back();
        if (stack.empty() || s.end_ns <= stack.back()) {
          stack.push_back(s.end_ns);
          break;
        }
      }
      if (lane == 0) continue;
      while (lane_tid.size() <= lane) {
        lane_tid.push_back(next_lane_tid++);
        std::string base = "tid " + std::to_string(key.second);
        int sort = 0;
        for (const auto& t : threads_)
          if (t.pid == key.first && t.tid == key.second) base = t.name, sort = t.sort_index;
        threads_.push_back({key.first, lane_tid.back(),
                            base + " (lane " + std::to_string(lane_tid.size()) + ")", sort});
      }
      s.tid = lane_tid[lane];
      ++moved;
    }
  }
  if (moved == 0) return 0;
  // Flow endpoints follow the innermost span that contained them on the original track: per
  // track, the spans by start; the innermost holder is the latest start <= ts that ends >= ts.
  std::map<TrackKey, std::vector<std::size_t>> starts;
  for (std::size_t i = 0; i < original.size(); ++i)
    starts[{original[i].pid, original[i].tid}].push_back(i);
  for (auto& [key, idx] : starts)
    std::sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) {
      return original[a].start_ns < original[b].start_ns;
    });
  auto rehome = [&](int pid, std::int64_t& tid, std::int64_t ts) {
    auto it = starts.find({pid, tid});
    if (it == starts.end()) return;
    const auto& idx = it->second;
    auto pos = std::upper_bound(idx.begin(), idx.end(), ts, [&](std::int64_t t, std::size_t i) {
      return t < original[i].start_ns;
    });
    while (pos != idx.begin()) {
      --pos;
      if (original[*pos].end_ns >= ts) {
        tid = spans_[*pos].tid;
        return;
      }
    }
  };
  for (auto& f : flows_) {
    rehome(f.from_pid, f.from_tid, f.from_ns);
    rehome(f.to_pid, f.to_tid, f.to_ns);
  }
  return moved;
}

std::string json_quote(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out.push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  out.push_back('"');
  return out;
}

std::string format_us(std::int64_t ns) {
  const bool neg = ns < 0;
  const std::uint64_t a = neg ? 0 - static_cast<std::uint64_t>(ns) : static_cast<std::uint64_t>(ns);
  char buf[40];
  std::snprintf(buf, sizeof buf, "%s%llu.%03llu", neg ? "-" : "",
                static_cast<unsigned long long>(a / 1000),
                static_cast<unsigned long long>(a % 1000));
  return buf;
}

namespace {

std::string format_double(double v) {
  if (!std::isfinite(v)) return json_quote(std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf"));
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.15g", v);
  return buf;
}

void write_args(std::ostream& out, const std::vector<Arg>& args) {
  out << "{";
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (i) out << ",";
    out << json_quote(args[i].key) << ":";
    std::visit(
        [&](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, std::string>)
            out << json_quote(v);
          else if constexpr (std::is_same_v<T, double>)
            out << format_double(v);
          else
            out << v;
        },
        args[i].value);
  }
  out << "}";
}

}  // namespace

void write_chrome_trace(std::ostream& out, const Timeline& tl,
                        const std::vector<std::pair<std::string, std::string>>& other_data) {
  const std::int64_t t0 = tl.origin_ns();
  bool first = true;
  auto next = [&]() -> std::ostream& {
    out << (first ? "\n" : ",\n");
    first = false;
    return out;
  };
  out << "{\"traceEvents\":[";
  for (const auto& p : tl.processes()) {
    next() << R"({"ph":"M","name":"process_name","pid":)" << p.pid << R"(,"tid":0,"args":{"name":)"
           << json_quote(p.name) << "}}";
    next() << R"({"ph":"M","name":"process_sort_index","pid":)" << p.pid
           << R"(,"tid":0,"args":{"sort_index":)" << p.sort_index << "}}";
    if (!p.label.empty())
      next() << R"({"ph":"M","name":"process_labels","pid":)" << p.pid
             << R"(,"tid":0,"args":{"labels":)" << json_quote(p.label) << "}}";
  }
  for (const auto& t : tl.threads()) {
    next() << R"({"ph":"M","name":"thread_name","pid":)" << t.pid << R"(,"tid":)" << t.tid
           << R"(,"args":{"name":)" << json_quote(t.name) << "}}";
    next() << R"({"ph":"M","name":"thread_sort_index","pid":)" << t.pid << R"(,"tid":)" << t.tid
           << R"(,"args":{"sort_index":)" << t.sort_index << "}}";
  }
  std::vector<const Span*> spans;
  spans.reserve(tl.spans().size());
  for (const auto& s : tl.spans()) spans.push_back(&s);
  // By start, longer first: a parent precedes its children, as viewers expect.
  std::stable_sort(spans.begin(), spans.end(), [](const Span* a, const Span* b) {
    return std::tie(a->start_ns, b->end_ns) < std::tie(b->start_ns, a->end_ns);
  });
  for (const Span* s : spans) {
    MACTUNE_CHECK(s->end_ns >= s->start_ns, "span '", s->name, "' ends before it starts");
    next() << R"({"ph":"X","name":)" << json_quote(s->name) << R"(,"cat":)" << json_quote(s->cat)
           << R"(,"pid":)" << s->pid << R"(,"tid":)" << s->tid << R"(,"ts":)"
           << format_us(s->start_ns - t0) << R"(,"dur":)" << format_us(s->end_ns - s->start_ns);
    if (!s->args.empty()) {
      out << R"(,"args":)";
      write_args(out, s->args);
    }
    out << "}";
  }
  for (const auto& c : tl.counters()) {
    next() << R"({"ph":"C","name":)" << json_quote(c.name) << R"(,"pid":)" << c.pid
           << R"(,"tid":0,"ts":)" << format_us(c.ts_ns - t0) << R"(,"args":{)";
    for (std::size_t i = 0; i < c.series.size(); ++i)
      out << (i ? "," : "") << json_quote(c.series[i].first) << ":"
          << format_double(c.series[i].second);
    out << "}}";
  }
  for (const auto& f : tl.flows()) {
    next() << R"({"ph":"s","id":)" << f.id << R"(,"cat":)" << json_quote(f.cat) << R"(,"name":)"
           << json_quote(f.name) << R"(,"pid":)" << f.from_pid << R"(,"tid":)" << f.from_tid
           << R"(,"ts":)" << format_us(f.from_ns - t0) << "}";
    next() << R"({"ph":"f","bp":"e","id":)" << f.id << R"(,"cat":)" << json_quote(f.cat)
           << R"(,"name":)" << json_quote(f.name) << R"(,"pid":)" << f.to_pid << R"(,"tid":)"
           << f.to_tid << R"(,"ts":)" << format_us(f.to_ns - t0) << "}";
  }
  out << "\n],\n\"displayTimeUnit\":\"ns\",\n\"otherData\":{";
  out << R"("origin_ns":)" << json_quote(std::to_string(t0));
  for (const auto& [k, v] : other_data) out << "," << json_quote(k) << ":" << json_quote(v);
  out << "}}\n";
}

void write_chrome_trace_file(const std::string& path, const Timeline& timeline,
                             const std::vector<std::pair<std::string, std::string>>& other_data) {
  AtomicFile file(path, "trace");  // checks the path before the trace is formatted
  std::ostringstream out;
  write_chrome_trace(out, timeline, other_data);
  file.write(out.str());
  file.commit();
}

}  // namespace mactune::prof
