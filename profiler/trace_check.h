// A structural validator of Chrome trace-event JSON, the checks Perfetto's importer and
// chrome://tracing rely on (there is no official schema): the file parses; every event has the
// keys its phase requires; durations are >= 0; the spans of one track nest; every flow end has
// its start (same id, cat and name) and both ends lie on a span; every track is named. Used by
// the tests and by `mactune profile`, which checks each trace it writes.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace mactune::prof {

struct TraceCheckOptions {
  // Decode-loop check: every span of category "step" contains, on any thread of its process,
  // a "phase" span of each of these names ...
  std::vector<std::string> phases_every_step;
  // ... and of each of these names in every step if it appears in any step ("plan" is
  // skipped by a backend that does not plan).
  std::vector<std::string> phases_where_present;
  int min_steps = 0;  // at least this many "step" spans
};

struct TraceCheck {
  std::vector<std::string> errors;  // one line each; empty = valid
  int events = 0, spans = 0, flows = 0, steps = 0, tracks = 0;
  bool ok() const { return errors.empty(); }
  std::string summary() const;  // the first few errors, one per line
};

TraceCheck check_chrome_trace(std::string_view json, const TraceCheckOptions& options = {});
TraceCheck check_chrome_trace_file(const std::string& path, const TraceCheckOptions& options = {});

}  // namespace mactune::prof
