// mactune: MAC-Attention kernels, tuner, store, dispatch tables and profiler.
// Every error reaches the user as one line on stderr and exit code 2 (bad input or a failed
// operation); a broken invariant or an unexpected exception exits 1 (cli/exit_code.h,
// docs/errors.md).
#include <CLI/CLI.hpp>

#include <exception>
#include <iostream>
#include <string>

#include "cli/exit_code.h"
#include "cli/options.h"
#include "cli/registry.h"
#include "db/db_error.h"
#include "kernels/error.h"
#include "kernels/one_line.h"

namespace {

// CLI11's own message as one line: "The following argument was not expected: x" and friends
// may hold newlines; the command that failed and where to look go after it.
std::string one_line(const CLI::App& app, const CLI::ParseError& e) {
  std::string msg = e.what();
  for (char& c : msg)
    if (c == '\n') c = ' ';
  msg = mactune::detail::one_line(msg);
  while (!msg.empty() && msg.back() == ' ') msg.pop_back();
  std::string cmd = "mactune";
  for (const CLI::App* a = &app;;) {
    const auto parsed = a->get_subcommands();
    if (parsed.empty()) break;
    a = parsed.front();
    cmd += " " + a->get_name();
  }
  return msg + " (see '" + cmd + " --help')";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"mactune: tune, replay and profile MAC-Attention decode kernels"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "mactune 0.1.0");
  for (auto& [name, add] : mactune::cli::command_table()) add(app);
  // A command blocked by another process's lock on a database says so after a second.
  mactune::db::set_lock_wait_notice([](const std::string& file, int timeout_ms) {
    std::cerr << "mactune: waiting for " << file << ": locked by another process (giving up after "
              << timeout_ms / 1000.0 << " s; Ctrl-C stops)" << std::endl;
  });
  mactune::cli::harden_options(app);
  try {
    mactune::cli::check_command_names(app, argc, argv);
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    std::cerr << "mactune: error: " << one_line(app, e) << '\n';
    return 2;
  } catch (...) {
    return mactune::cli::report_exception(std::current_exception(), std::cerr);
  }
  return mactune::cli::command_exit_code();
}
