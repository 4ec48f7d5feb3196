#include "profiler/nsys.h"

#include <unistd.h>

#include <climits>

namespace mactune::prof {

std::string shell_quote(std::string_view w) {
  if (w.empty()) return "''";
  bool safe = true;
  for (char c : w) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-' || c == '.' || c == '/' || c == ':' || c == '=' ||
                    c == ',' || c == '+' || c == '@' || c == '%';
    safe = safe && ok;
  }
  if (safe) return std::string(w);
  std::string out = "'";
  for (char c : w) {
    if (c == '\'')
      out += "'\\''";
    else
      out.push_back(c);
  }
  out += "'";
  return out;
}

std::string nsys_command(const std::vector<std::string>& program, const NsysOptions& o) {
  std::vector<std::string> words = {"nsys", "profile", "--trace=cuda,nvtx",
                                    "--cuda-graph-trace=node"};
  if (o.cuda) {
    words.push_back("--capture-range=cudaProfilerApi");
  } else {
    words.push_back("--capture-range=nvtx");
    words.push_back("--nvtx-capture=" + std::string(kMeasureRange) + "@mactune");
  }
  words.push_back("--capture-range-end=stop");
  words.push_back("--sample=none");
  words.push_back("--cpuctxsw=none");
  if (o.export_sqlite) words.push_back("--export=sqlite");
  words.push_back("--force-overwrite=true");
  words.push_back("--output=" + o.output);
  words.insert(words.end(), program.begin(), program.end());
  std::string out;
  for (const auto& w : words) {
    if (!out.empty()) out += ' ';
    out += shell_quote(w);
  }
  return out;
}

std::string self_executable(const std::string& fallback) {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return fallback;
  return std::string(buf, static_cast<std::size_t>(n));
}

}  // namespace mactune::prof
