// The command table: each cmd_*.cpp registers a function that adds its subcommand.
//   const bool registered_tune = mactune::cli::register_command("tune", add_tune);
// (in the file's unnamed namespace; the name carries the command's, as every internal name of
// cli/ must be unique to its file: the quick preset compiles the folder as unity batches).
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <map>
#include <string>

namespace mactune::cli {

using AddCommand = std::function<void(CLI::App&)>;

inline std::map<std::string, AddCommand>& command_table() {
  static std::map<std::string, AddCommand> table;  // sorted: help lists commands by name
  return table;
}

// The exit code of a command that succeeded but answers with one (`compare`: 1 when something
// got slower); main() returns it. Errors still exit 2.
inline int& command_exit_code() {
  static int rc = 0;
  return rc;
}

inline bool register_command(const std::string& name, AddCommand add) {
  command_table().emplace(name, std::move(add));
  return true;
}

}  // namespace mactune::cli
