#include "cli/options.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string_view>

#include <map>
#include <vector>

#include "kernels/error.h"
#include "kernels/fields.h"

namespace mactune::cli {

const char* const exit_codes_text =
    "Exit codes: 0 done; 2 bad input or a failed operation (one line 'mactune: error: ...' on "
    "stderr; what was stored or written before stays: docs/errors.md); 1 an internal error (or, "
    "for compare, a point SLOWER).";

namespace {

// The option's value type as CLI11 names it, without validator descriptions: "FLOAT",
// "INT", "TEXT", "" for a flag.
std::string base_type(const CLI::Option& o) {
  const std::string t = o.get_type_name();
  return t.substr(0, t.find(':'));
}

CLI::Validator non_empty() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        return s.empty() ? "an empty value (leave the option out for its default)" : "";
      },
      "", "NON_EMPTY");
}

// Integers as specs write them (parse_real: 4096, 64K, 1e6, +8), rewritten in plain decimal
// for CLI11 (which reads "010" as octal and "-1" as 2^64 - 1 for an unsigned type).
CLI::Validator integer_text(bool is_unsigned) {
  return CLI::Validator(
      [is_unsigned](std::string& s) -> std::string {
        if (s.empty()) return "";  // non_empty() says so
        const std::optional<double> v = parse_real(s);
        if (!v) return "'" + s + "' is not an integer";
        if (*v != std::floor(*v)) return "'" + s + "' is not an integer";
        if (is_unsigned && *v < 0) return "'" + s + "' is negative (must be at least 0)";
        // int options hold 32 bits; the unsigned ones (counts, seeds) up to 2^53 exactly.
        const double hi = is_unsigned ? 9007199254740992.0 : 2147483647.0;
        const double lo = is_unsigned ? 0.0 : -2147483648.0;
        if (*v > hi || *v < lo)
          return "'" + s + "' is out of range (at most " + format_real(hi) + ")";
        s = std::to_string(static_cast<long long>(*v));
        return "";
      },
      "", "INTEGER");
}

// The option's type as CLI11 names it (INT, UINT, FLOAT, TEXT), or "" for a flag.
bool takes_value(const CLI::Option& o) {
  return o.get_type_size_max() > 0 && !base_type(o).empty();
}

// The key a list value compares by: a number's shortest text (-0 as 0, 1e3 as 1000), else
// the text itself.
std::string value_key(const CLI::Option& o, const std::string& text) {
  const std::string t = base_type(o);
  if (t == "INT" || t == "UINT" || t == "FLOAT" || t == "NUMBER")
    if (const std::optional<double> v = parse_real(text)) return format_real(*v == 0 ? 0.0 : *v);
  return text;
}

// The option `name` ("--K", "-o") of `at` or of a command above it.
const CLI::Option* find_option(const CLI::App* at, const std::string& name) {
  for (; at != nullptr; at = at->get_parent())
    for (const CLI::Option* o : at->get_options())
      if (o->check_name(name)) return o;
  return nullptr;
}

bool looks_like_number(const std::string& s) {
  return parse_real(s).has_value();
}

}  // namespace

CLI::Validator number_in(double lo, double hi) {
  const std::string want = hi == std::numeric_limits<double>::infinity()
                               ? "must be at least " + format_real(lo)
                               : "must be in [" + format_real(lo) + ", " + format_real(hi) + "]";
  return CLI::Validator(
      [lo, hi, want](std::string& s) -> std::string {
        const std::optional<double> v = parse_real(s);
        if (!v) return "";  // not a (finite) number: finite_number() or CLI11 says so
        if (!(*v >= lo && *v <= hi)) return s + " " + want;
        return "";
      },
      "", "RANGE");
}

CLI::Validator finite_number() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        errno = 0;
        char* end = nullptr;
        const double v = std::strtod(s.c_str(), &end);
        if (end == s.c_str() || *end != '\0') return "";  // not a number: CLI11 says so
        if (!std::isfinite(v)) return "'" + s + "' is not a finite number";
        return "";
      },
      "", "FINITE");
}

void harden_options(CLI::App& app) {
  app.footer(exit_codes_text);
  for (CLI::Option* o : app.get_options()) {
    if (!takes_value(*o)) continue;  // a flag
    const std::string t = base_type(*o);
    // Before any other check of the option: the empty value first, then the integer text.
    o->check(non_empty());
    if (t == "INT" || t == "[INT]") o->transform(integer_text(false));
    if (t == "UINT" || t == "[UINT]") o->transform(integer_text(true));
    if (t == "FLOAT" || t == "[FLOAT]") o->check(finite_number());
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) harden_options(*sub);
}

void check_list_values(const CLI::App& app, int argc, const char* const* argv) {
  const CLI::App* at = &app;
  std::map<const CLI::Option*, std::vector<std::string>> given;
  std::map<const CLI::Option*, std::string> flag_of;
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word == "--") break;
    if (word.empty() || word[0] != '-' || looks_like_number(word)) {
      // A command word (`mactune db merge`), or a positional value.
      for (const CLI::App* s : at->get_subcommands([](const CLI::App*) { return true; }))
        if (s->check_name(word)) {
          at = s;
          break;
        }
      continue;
    }
    const auto eq = word.find('=');
    const std::string name = word.substr(0, eq);
    const CLI::Option* o = find_option(at, name);
    if (o == nullptr || !takes_value(*o)) continue;  // CLI11 names an unknown option
    std::vector<std::string> values;
    if (eq != std::string::npos) {
      values.push_back(word.substr(eq + 1));
    } else {
      // The next word, and for an option taking several, the words up to the next option.
      const bool several = o->get_items_expected_max() > 1;
      while (i + 1 < argc) {
        const std::string next = argv[i + 1];
        if (!next.empty() && next[0] == '-' && !looks_like_number(next)) break;
        values.push_back(next);
        ++i;
        if (!several) break;
      }
    }
    flag_of[o] = name;
    for (const std::string& v : values) {
      const char d = o->get_delimiter();
      if (d == '\0' || v.find(d) == std::string::npos) {
        given[o].push_back(v);
        continue;
      }
      std::size_t from = 0;
      for (;;) {
        const std::size_t to = v.find(d, from);
        const std::string item = v.substr(from, to == std::string::npos ? to : to - from);
        if (item.empty())
          input_error(name, " '", v, "': an empty value in the list (write each value once, ",
                      "separated by '", d, "')");
        given[o].push_back(item);
        if (to == std::string::npos) break;
        from = to + 1;
      }
    }
  }
  for (const auto& [o, values] : given) {
    std::map<std::string, const std::string*> seen;
    for (const std::string& v : values) {
      if (v.empty()) continue;  // non_empty() refuses it, with the option's name
      const auto [it, fresh] = seen.emplace(value_key(*o, v), &v);
      if (!fresh)
        input_error(flag_of[o], ": ",
                    *it->second == v ? "'" + v + "'" : "'" + *it->second + "' and '" + v + "'",
                    " given twice (each value of a list runs once)");
    }
  }
}

void check_command_names(const CLI::App& app, int argc, const char* const* argv) {
  const CLI::App* at = &app;
  std::string path = "mactune";
  for (int i = 1; i < argc; ++i) {
    const std::string_view word = argv[i];
    const auto subs = at->get_subcommands([](const CLI::App*) { return true; });
    if (subs.empty() || word.empty() || word[0] == '-') return;  // options: CLI11's job
    const CLI::App* next = nullptr;
    std::string names;
    for (const CLI::App* s : subs) {
      if (s->check_name(std::string(word))) next = s;
      names += (names.empty() ? "" : ", ") + s->get_name();
    }
    if (!next)
      input_error("unknown command '", path, " ", word, "' (", path, " has: ", names, "; see '",
                  path, " --help')");
    at = next;
    path += " " + at->get_name();
  }
  if (at->get_require_subcommand_min() > 0) {
    std::string names;
    for (const CLI::App* s : at->get_subcommands([](const CLI::App*) { return true; }))
      names += (names.empty() ? "" : ", ") + s->get_name();
    input_error("'", path, "' needs a command: one of ", names, " (see '", path, " --help')");
  }
}

}  // namespace mactune::cli
