// The records of mactune_gpu_check: one JSON object a line, appended and flushed as each is
// measured, so a kill at the lease's limit loses at most the line being written (a torn last
// line; scripts/gpu_report.py says so). Every record has a "kind"; scripts/gpu_report.py
// declares the keys it reads of each kind, and the dry run checks them against this output.
#pragma once

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <string_view>

namespace mactune::cuda::check {

class Record {
 public:
  explicit Record(std::string_view kind) { str("kind", kind); }

  Record& num(std::string_view key, double v) {  // not finite (not measured): null
    if (!std::isfinite(v)) return raw(key, "null");
    char b[32];
    std::snprintf(b, sizeof b, "%.6g", v);
    return raw(key, b);
  }
  Record& integer(std::string_view key, long long v) { return raw(key, std::to_string(v)); }
  Record& flag(std::string_view key, bool v) { return raw(key, v ? "true" : "false"); }
  Record& str(std::string_view key, std::string_view v) {
    std::string q = "\"";
    for (char c : v) {
      if (c == '"' || c == '\\') q += '\\';
      if (static_cast<unsigned char>(c) < 0x20) c = ' ';
      q += c;
    }
    return raw(key, q + "\"");
  }
  std::string json() const { return body_ + "}"; }

 private:
  Record& raw(std::string_view key, std::string_view value) {
    body_ += body_.empty() ? "{\"" : ", \"";
    body_.append(key).append("\": ").append(value);
    return *this;
  }
  std::string body_;
};

// Appends records to a JSON-lines file, one flushed line each.
class RecordFile {
 public:
  explicit RecordFile(const std::string& path) : out_(path, std::ios::app) {}
  bool good() const { return out_.good(); }
  void write(const Record& r) {
    out_ << r.json() << '\n';
    out_.flush();
  }

 private:
  std::ofstream out_;
};

}  // namespace mactune::cuda::check
