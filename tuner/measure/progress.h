// Progress of a sweep: on a terminal a one-line bar with the ETA redrawn in place; otherwise
// (a log file, CI, a Slurm job) one plain line per finished point.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>

namespace mactune::tuner {

class Progress {
 public:
  // `out` is where lines go (stderr in the CLI); `tty`: redraw a bar instead of printing lines.
  Progress(std::FILE* out, bool tty) : out_(out), tty_(tty) {}
  // A Progress that prints nothing (tests, library use).
  static Progress silent() { return Progress(nullptr, false); }
  // For the CLI: stderr, with a bar when stderr is a terminal and TERM is not "dumb".
  static Progress for_stderr();

  // `total` points in this run, `done` of them already stored (skipped on resume).
  void start(std::size_t total, std::size_t done);
  // A point begins (shown in the bar).
  void begin(const std::string& what);
  // A point ends: `line` is its one-line result; `measured` false for skipped/failed ones
  // (they do not count towards the ETA's time per point).
  void end(const std::string& line, bool measured);
  // Any other message (a warning), printed on its own line without breaking the bar.
  void note(const std::string& line);
  void finish();

  std::size_t done() const { return done_; }
  // "1h02m", "3m05s", "12s".
  static std::string format_duration(double seconds);
  // The bar text for a state (pure; tested): "[#####-----] 12/48  25%  ETA 3m05s  <what>".
  static std::string bar(std::size_t done, std::size_t total, double eta_seconds, bool eta_known,
                         const std::string& what, int width = 30);

 private:
  void redraw();
  void clear_line();

  std::FILE* out_;
  bool tty_;
  std::size_t total_ = 0, done_ = 0, measured_ = 0;
  double measured_seconds_ = 0;
  std::string what_;
  std::chrono::steady_clock::time_point point_start_{};
  std::chrono::steady_clock::time_point run_start_{};
};

}  // namespace mactune::tuner
