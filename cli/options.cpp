#include "cli/options.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string_view>

#include "kernels/error.h"

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

}  // namespace

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
    const std::string t = base_type(*o);
    if (t == "FLOAT" || t == "[FLOAT]") o->check(finite_number());
    if (t == "TEXT" || t == "[TEXT]") o->check(non_empty());
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) harden_options(*sub);
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
