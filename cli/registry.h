// The command table: each cmd_*.cpp registers a function that adds its subcommand.
//   static const bool registered = mactune::cli::register_command("tune", add_tune);
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

inline bool register_command(const std::string& name, AddCommand add) {
  command_table().emplace(name, std::move(add));
  return true;
}

}  // namespace mactune::cli
