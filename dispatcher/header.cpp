// The C++ header form of a dispatch table: constexpr StaticTable data (dispatcher/static_table.h)
// and a function returning the DispatchTable, so an engine that links the table statically goes
// through the same validation and select() as one that loads the JSON.
#include <charconv>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>

#include "dispatcher/table.h"
#include "kernels/error.h"

namespace mactune::dispatch {
namespace {

// A C++ string literal holding exactly the bytes of `s` (octal escapes never run on, unlike \x).
std::string literal(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c >= 0x20 && c < 0x7f && c != '?') {  // '?': no trigraph-like sequences
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\%03o", c);
      out += buf;
    }
  }
  return out + "\"";
}

std::string integer(std::int64_t x) {
  if (x == std::numeric_limits<std::int64_t>::min()) return "(-9223372036854775807 - 1)";
  return std::to_string(x);
}

// Shortest text that reads back as the same double, as a floating literal.
std::string real(double x) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, x);
  std::string s(buf, r.ptr);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

bool identifier(std::string_view s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

bool qualified_identifier(std::string_view s) {
  for (std::size_t at = 0;;) {
    const std::size_t next = s.find("::", at);
    if (!identifier(s.substr(at, next == std::string_view::npos ? next : next - at))) return false;
    if (next == std::string_view::npos) return true;
    at = next + 2;
  }
}

constexpr const char* kNs = "::mactune::dispatch::";

// Emits `inline constexpr StaticParam <name>[] = {...};` and returns the pointer expression.
std::string emit_params(std::ostringstream& out, const Params& params, const std::string& name) {
  if (params.empty()) return "nullptr";
  out << "inline constexpr " << kNs << "StaticParam " << name << "[] = {\n";
  for (const auto& [key, value] : params) {
    out << "    {" << literal(key) << ", " << kNs << "StaticParamKind::";
    if (const auto* i = std::get_if<std::int64_t>(&value))
      out << "integer, " << integer(*i) << ", 0.0, nullptr},\n";
    else if (const auto* d = std::get_if<double>(&value))
      out << "real, 0, " << real(*d) << ", nullptr},\n";
    else if (const auto* b = std::get_if<bool>(&value))
      out << "boolean, " << (*b ? 1 : 0) << ", 0.0, nullptr},\n";
    else
      out << "string, 0, 0.0, " << literal(std::get<std::string>(value)) << "},\n";
  }
  out << "};\n";
  return name;
}

std::string bound(const std::optional<std::int64_t>& hi) {
  return hi ? integer(*hi) : std::string(kNs) + "kUnbounded";
}

}  // namespace

std::string to_header(const DispatchTable& t, std::string_view ns, std::string_view function) {
  MACTUNE_REQUIRE(qualified_identifier(ns), "header namespace '", ns, "' is not a C++ name");
  MACTUNE_REQUIRE(identifier(function), "header function '", function, "' is not a C++ name");
  const std::string why = check_structure(t);
  MACTUNE_REQUIRE(why.empty(), "refusing to write a header for an invalid dispatch table: ", why);

  std::ostringstream data;  // the arrays, inside namespace detail_<function>
  std::vector<std::string> full_params, mac_params;
  for (std::size_t i = 0; i < t.entries.size(); ++i) {
    const Entry& e = t.entries[i];
    full_params.push_back(emit_params(data, e.full.params, "full_params_" + std::to_string(i)));
    mac_params.push_back(e.mac ? emit_params(data, e.mac->params, "mac_params_" + std::to_string(i))
                               : "nullptr");
  }
  if (!t.entries.empty()) {
    data << "inline constexpr " << kNs << "StaticEntry entries[] = {\n";
    for (std::size_t i = 0; i < t.entries.size(); ++i) {
      const Entry& e = t.entries[i];
      data << "    {" << e.shape.head_dim << ", " << e.shape.q_heads << ", " << e.shape.kv_heads
           << ", " << literal(dtype_name(e.shape.kv_dtype)) << ", " << e.shape.page_size << ",\n"
           << "     " << integer(e.batch.lo) << ", " << bound(e.batch.hi) << ", "
           << integer(e.context.lo) << ", " << bound(e.context.hi) << ",\n"
           << "     " << literal(e.full.instance) << ", " << full_params[i] << ", "
           << e.full.params.size() << ",\n";
      if (e.mac) {
        const MacChoice& m = *e.mac;
        data << "     true, " << literal(m.instance) << ", " << m.ring_capacity << ", " << m.band
             << ", " << (m.tau ? "true, " + real(*m.tau) : std::string("false, 0.0")) << ", "
             << mac_params[i] << ", " << m.params.size() << ",\n";
      } else {
        data << "     false, nullptr, 0, 0, false, 0.0, nullptr, 0,\n";
      }
      data << "     " << (e.min_hit_rate ? "true, " + real(*e.min_hit_rate) : "false, 0.0") << ", "
           << literal(e.note) << "},\n";
    }
    data << "};\n";
  }
  data << "inline constexpr " << kNs << "StaticTable data = {\n"
       << "    " << literal(t.schema) << ",\n"
       << "    " << literal(std::string(name_of(t.device.backend))) << ", "
       << literal(t.device.name) << ", " << literal(t.device.fingerprint) << ",\n"
       << "    " << literal(t.generated.version) << ", " << literal(t.generated.git_revision)
       << ", " << literal(t.generated.source_database) << ", " << literal(t.generated.time) << ",\n"
       << "    " << (t.entries.empty() ? "nullptr" : "entries") << ", " << t.entries.size()
       << "};\n";

  std::ostringstream out;
  out << "// Generated by mactune (dispatcher/header.cpp): the dispatch table of\n"
      << "// device " << literal(t.device.name) << " (" << t.device.backend << ", fingerprint "
      << literal(t.device.fingerprint) << "), " << t.entries.size() << " entries, schema "
      << t.schema << ".\n"
      << "// Do not edit: regenerate with `mactune emit --header`. Use:\n"
      << "//   auto d = mactune::dispatch::Dispatcher::from_table(" << ns << "::" << function
      << "(), \"" << function << "\");\n"
      << "#pragma once\n\n"
      << "#include \"dispatcher/dispatch.h\"\n"
      << "#include \"dispatcher/static_table.h\"\n\n"
      << "namespace " << ns << " {\n"
      << "namespace detail_" << function << " {\n\n"
      << data.str() << "\n}  // namespace detail_" << function << "\n\n"
      << "inline ::mactune::dispatch::DispatchTable " << function << "() {\n"
      << "  return ::mactune::dispatch::from_static(detail_" << function << "::data);\n"
      << "}\n\n"
      << "}  // namespace " << ns << "\n";
  return out.str();
}

void write_header(const DispatchTable& t, const std::filesystem::path& path, std::string_view ns,
                  std::string_view function) {
  const std::string text = to_header(t, ns, function);
  detail::write_atomically(path, text, "dispatch header");
}

}  // namespace mactune::dispatch
