// Rules every option of every command obeys, applied once to the whole command tree after the
// commands have added their options (so options a command generates, e.g. from field tables,
// get them too), rather than option by option:
//   - a real-valued option refuses NaN and +-inf (CLI::Range lets NaN through);
//   - every option with a value refuses the empty string: `--db ''` or `--tau ''` is a
//     mistake, not a request for the default (CLI11 would read '' as 0);
//   - an integer option reads its value as specs do (4096, 64K, 1e6; decimal, so "010" is ten,
//     not CLI11's octal eight) and refuses a fraction, a negative count for an unsigned one
//     (`--seed -1`) and a value its type cannot hold;
//   - every --help ends with the exit codes.
// And the command words are checked before CLI11 parses: `mactune frobnicate` names the unknown
// command instead of "A subcommand is required".
#pragma once

#include <CLI/CLI.hpp>

#include <limits>
#include <optional>
#include <string>

#include "kernels/enum_names.h"
#include "kernels/error.h"

namespace mactune::cli {

// The exit codes every command shares (docs/errors.md); the footer of every --help.
extern const char* const exit_codes_text;

// A CLI11 validator refusing a value that parses as a number but is not finite ("nan", "inf",
// "1e999"). The message names the value; CLI11 prefixes the option's name.
CLI::Validator finite_number();

// A CLI11 validator refusing a number outside [lo, hi] (hi = +inf: "at least lo"), with the
// bounds as written ("must be in [0, 0.99]", "must be at least 1"), never CLI11's Range text
// (std::to_string of the largest double: 300 digits).
CLI::Validator number_in(double lo, double hi = std::numeric_limits<double>::infinity());

// `flag NAME`, the name parsed through E's name table and handed to `set` (add_enum_option's
// body; not in a `detail` namespace, which would hide mactune::detail from cli/ code).
template <NamedEnum E, class Set>
CLI::Option* add_enum_flag(CLI::App& cmd, const std::string& flag, Set set,
                           const std::string& help) {
  std::string choices;
  for (const auto& n : EnumNames<E>::names)
    if (name_of(n.value) == n.name) choices += (choices.empty() ? "" : ",") + std::string(n.name);
  return cmd
      .add_option_function<std::string>(
          flag,
          [set, flag](const std::string& text) {
            try {
              set(parse_enum<E>(text));
            } catch (const InputError& e) {
              input_error(flag.substr(0, flag.find(',')), ": ", e.what());
            }
          },
          help)
      ->type_name("{" + choices + "}");
}

// `flag NAME` read into `target` through its enum's name table (kernels/enum_names.h): one
// InputError line "--backend: unknown backend 'tpu' (expected cpu or cuda)" otherwise. The
// default shown is the target's value; an optional target stays none unless the flag is given.
template <NamedEnum E>
CLI::Option* add_enum_option(CLI::App& cmd, const std::string& flag, E& target,
                             const std::string& help) {
  return add_enum_flag<E>(
             cmd, flag, [&target](E v) { target = v; }, help)
      ->default_str(std::string(name_of(target)));
}
template <NamedEnum E>
CLI::Option* add_enum_option(CLI::App& cmd, const std::string& flag, std::optional<E>& target,
                             const std::string& help) {
  return add_enum_flag<E>(
      cmd, flag, [&target](E v) { target = v; }, help);
}

// Adds the rules above to `app`, its options and every subcommand, recursively.
void harden_options(CLI::App& app);

// Throws InputError for a list value with an empty item (`--K 256,,512`, `--tau 0.4,`: CLI11
// drops the empty item without a word) and for a value given twice to one option (`--K
// 256,256`, `--tau 0.5 --tau 0.50`: a list runs each value once), numbers compared as numbers.
// Run on argv before CLI11 parses it.
void check_list_values(const CLI::App& app, int argc, const char* const* argv);

// Throws InputError when a word of argv that selects a command (`mactune X`, `mactune db X`)
// names none, listing the commands there are.
void check_command_names(const CLI::App& app, int argc, const char* const* argv);

}  // namespace mactune::cli
