#include "tuner/measure/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace mactune::tuner {

Progress Progress::for_stderr() {
  const char* term = std::getenv("TERM");
  const bool tty = isatty(fileno(stderr)) && !(term && std::strcmp(term, "dumb") == 0);
  return Progress(stderr, tty);
}

std::string Progress::format_duration(double s) {
  if (!(s >= 0) || !std::isfinite(s)) return "?";
  const long long t = std::llround(s);
  std::ostringstream o;
  if (t >= 3600)
    o << t / 3600 << 'h' << (t % 3600 / 60 < 10 ? "0" : "") << t % 3600 / 60 << 'm';
  else if (t >= 60)
    o << t / 60 << 'm' << (t % 60 < 10 ? "0" : "") << t % 60 << 's';
  else
    o << t << 's';
  return o.str();
}

std::string Progress::bar(std::size_t done, std::size_t total, double eta, bool eta_known,
                          const std::string& what, int width) {
  const double frac = total ? static_cast<double>(done) / static_cast<double>(total) : 1.0;
  const int fill = static_cast<int>(std::floor(frac * width + 1e-9));
  std::ostringstream o;
  o << '[' << std::string(static_cast<std::size_t>(fill), '#')
    << std::string(static_cast<std::size_t>(width - fill), '-') << "] " << done << '/' << total
    << ' ' << static_cast<int>(std::floor(frac * 100 + 1e-9)) << "%  ETA "
    << (eta_known ? format_duration(eta) : std::string("?"));
  if (!what.empty()) o << "  " << what;
  return o.str();
}

void Progress::start(std::size_t total, std::size_t done) {
  total_ = total;
  done_ = done;
  run_start_ = std::chrono::steady_clock::now();
  if (!out_) return;
  if (tty_)
    redraw();
  else
    std::fprintf(out_, "mactune: %zu points, %zu already stored\n", total, done);
}

void Progress::begin(const std::string& what) {
  what_ = what;
  point_start_ = std::chrono::steady_clock::now();
  if (out_ && tty_) redraw();
}

void Progress::end(const std::string& line, bool measured) {
  ++done_;
  if (measured) {
    ++measured_;
    measured_seconds_ +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - point_start_).count();
  }
  what_.clear();
  if (!out_) return;
  if (tty_) {
    clear_line();
    std::fprintf(out_, "%s\n", line.c_str());
    redraw();
  } else {
    std::fprintf(out_, "[%zu/%zu] %s\n", done_, total_, line.c_str());
    std::fflush(out_);
  }
}

void Progress::note(const std::string& line) {
  if (!out_) return;
  if (tty_) clear_line();
  std::fprintf(out_, "%s\n", line.c_str());
  if (tty_) redraw();
  std::fflush(out_);
}

void Progress::finish() {
  if (!out_) return;
  if (tty_) {
    clear_line();
    std::fprintf(out_, "%s\n", bar(done_, total_, 0, true, "done", 30).c_str());
  }
  std::fflush(out_);
}

void Progress::clear_line() {
  std::fprintf(out_, "\r\033[K");
}

void Progress::redraw() {
  const bool known = measured_ > 0;
  const double per_point = known ? measured_seconds_ / static_cast<double>(measured_) : 0;
  const double eta = per_point * static_cast<double>(total_ > done_ ? total_ - done_ : 0);
  std::string text = bar(done_, total_, eta, known, what_);
  // Never wrap: a wrapped line cannot be redrawn in place.
  winsize ws{};
  if (ioctl(fileno(out_), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 10 && text.size() >= ws.ws_col)
    text.resize(ws.ws_col - 1);
  clear_line();
  std::fprintf(out_, "%s", text.c_str());
  std::fflush(out_);
}

}  // namespace mactune::tuner
