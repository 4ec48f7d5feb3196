// Rules every option of every command obeys, applied once to the whole command tree after the
// commands have added their options (so options a command generates, e.g. from field tables,
// get them too), rather than option by option:
//   - a real-valued option refuses NaN and +-inf (CLI::Range lets NaN through);
//   - a text option (a path, a name, a choice) refuses the empty string: `--db ''` is a
//     mistake, not a request for the default;
//   - every --help ends with the exit codes.
// And the command words are checked before CLI11 parses: `mactune frobnicate` names the unknown
// command instead of "A subcommand is required".
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace mactune::cli {

// The exit codes every command shares (docs/errors.md); the footer of every --help.
extern const char* const exit_codes_text;

// A CLI11 validator refusing a value that parses as a number but is not finite ("nan", "inf",
// "1e999"). The message names the value; CLI11 prefixes the option's name.
CLI::Validator finite_number();

// Adds the rules above to `app`, its options and every subcommand, recursively.
void harden_options(CLI::App& app);

// Throws InputError when a word of argv that selects a command (`mactune X`, `mactune db X`)
// names none, listing the commands there are.
void check_command_names(const CLI::App& app, int argc, const char* const* argv);

}  // namespace mactune::cli
