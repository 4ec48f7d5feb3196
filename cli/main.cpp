// mactune: MAC-Attention kernels, tuner, store, dispatch tables and profiler.
// Every error reaches the user as one line on stderr and exit code 2 (bad input or a failed
// operation); an unexpected internal failure exits 1.
#include <CLI/CLI.hpp>

#include <exception>
#include <iostream>

#include "cli/registry.h"
#include "db/db_error.h"
#include "kernels/error.h"

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
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  } catch (const mactune::Error& e) {
    std::cerr << "mactune: error: " << e.what() << '\n';
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "mactune: internal error: " << e.what() << '\n';
    return 1;
  }
  return mactune::cli::command_exit_code();
}
