// A timeline: named tracks (processes and threads), complete spans, counters and flow arrows,
// all on the profiler clock (profiler/clock.h, ns). It is what every source (the CPU phase
// tracer, CUPTI activity, the decode loop) adds to, and what the Chrome-trace writer prints.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace mactune::prof {

// One span argument: shown in the viewer's details pane.
struct Arg {
  std::string key;
  std::variant<std::int64_t, double, std::string> value;
};

// A complete span ("X" event) on track (pid, tid): [start_ns, end_ns).
struct Span {
  std::string name;
  std::string cat;  // "phase", "step", "cuda_api", "kernel", "memcpy", "memset", "sync"
  int pid = 0;
  std::int64_t tid = 0;
  std::int64_t start_ns = 0, end_ns = 0;
  std::vector<Arg> args;
};

// A counter sample ("C" event): each series becomes one line on the counter track `name`.
struct Counter {
  std::string name;
  int pid = 0;
  std::int64_t ts_ns = 0;
  std::vector<std::pair<std::string, double>> series;
};

// An arrow from a point inside one span to the start of another (Chrome "s"/"f" flow events),
// e.g. from a cudaLaunchKernel call to the kernel it launched. (id, cat, name) identify it.
struct Flow {
  std::uint64_t id = 0;
  std::string cat = "launch", name = "launch";
  int from_pid = 0;
  std::int64_t from_tid = 0, from_ns = 0;
  int to_pid = 0;
  std::int64_t to_tid = 0, to_ns = 0;
};

struct ProcessTrack {
  int pid = 0;
  std::string name;
  int sort_index = 0;
  std::string label;  // optional: shown beside the name (e.g. the device fingerprint)
};
struct ThreadTrack {
  int pid = 0;
  std::int64_t tid = 0;
  std::string name;
  int sort_index = 0;
};

class Timeline {
 public:
  void name_process(int pid, std::string name, int sort_index, std::string label = {});
  void name_thread(int pid, std::int64_t tid, std::string name, int sort_index);
  bool has_thread(int pid, std::int64_t tid) const;

  void add(Span span) { spans_.push_back(std::move(span)); }
  void add(Counter counter) { counters_.push_back(std::move(counter)); }
  void add(Flow flow) { flows_.push_back(std::move(flow)); }

  const std::vector<Span>& spans() const { return spans_; }
  const std::vector<Counter>& counters() const { return counters_; }
  const std::vector<Flow>& flows() const { return flows_; }
  const std::vector<ProcessTrack>& processes() const { return processes_; }
  const std::vector<ThreadTrack>& threads() const { return threads_; }

  // Earliest timestamp of any event (0 when empty): the trace's time zero.
  std::int64_t origin_ns() const;

  // Moves spans that overlap without nesting on their track (clock jitter between GPU records,
  // concurrent syncs) to extra "lane" tracks named "<track> (lane 2)" and so on, so every track
  // of the written trace nests as the Chrome format requires. Returns the number moved.
  int separate_overlaps();

 private:
  std::vector<ProcessTrack> processes_;
  std::vector<ThreadTrack> threads_;
  std::vector<Span> spans_;
  std::vector<Counter> counters_;
  std::vector<Flow> flows_;
};

// Writes the Chrome trace-event JSON object (chrome://tracing, Perfetto, Speedscope):
// {"traceEvents": [...], "displayTimeUnit": "ns", "otherData": {...}}. Timestamps are µs
// relative to origin_ns(), printed with integer arithmetic to keep ns precision; process and
// thread names are "M" metadata events; spans are "X" events sorted by start; flows are "s"/"f"
// pairs (the "f" binds to the span that starts at its timestamp, "bp": "e").
// `other_data` lands in "otherData" (strings): command line, device, instance, clock.
void write_chrome_trace(std::ostream& out, const Timeline& timeline,
                        const std::vector<std::pair<std::string, std::string>>& other_data = {});
void write_chrome_trace_file(const std::string& path, const Timeline& timeline,
                             const std::vector<std::pair<std::string, std::string>>& other_data);

// JSON string literal of `s` (quotes included, control characters escaped, UTF-8 passed on).
std::string json_quote(std::string_view s);
// Relative time in µs with three decimals from a ns difference: 1234567 -> "1234.567".
std::string format_us(std::int64_t ns);

}  // namespace mactune::prof
