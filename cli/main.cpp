// mactune: MAC-Attention kernels, tuner, store, dispatch tables and profiler.
// Every error reaches the user as one line on stderr and exit code 2 (bad input or a failed
// operation); an unexpected internal failure exits 1 (docs/errors.md).
#include <CLI/CLI.hpp>

#include <exception>
#include <iostream>
#include <new>
#include <stdexcept>
#include <string>

#include "cli/options.h"
#include "cli/registry.h"
#include "db/db_error.h"
#include "kernels/error.h"
#include "kernels/one_line.h"

namespace {

// "mactune db merge": the command words of the parsed command line.
std::string command_words(const CLI::App& app) {
  std::string cmd = "mactune";
  for (const CLI::App* a = &app;;) {
    const auto parsed = a->get_subcommands();
    if (parsed.empty()) break;
    a = parsed.front();
    cmd += " " + a->get_name();
  }
  return cmd;
}

// CLI11's own message as one line: "The following argument was not expected: x" and friends
// may hold newlines; the command that failed and where to look go after it.
std::string one_line(const CLI::App& app, const CLI::ParseError& e) {
  std::string msg = e.what();
  for (char& c : msg)
    if (c == '\n') c = ' ';
  msg = mactune::detail::one_line(msg);
  while (!msg.empty() && msg.back() == ' ') msg.pop_back();
  return msg + " (see '" + command_words(app) + " --help')";
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
    mactune::cli::check_list_values(app, argc, argv);
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    std::cerr << "mactune: error: " << one_line(app, e) << '\n';
    return 2;
  } catch (const mactune::Error& e) {
    std::cerr << "mactune: error: " << mactune::detail::one_line(e.what()) << '\n';
    return 2;
  } catch (const std::bad_alloc&) {  // (and std::length_error below: a size past max_size)
    // An allocation no check foresaw (the sizes a request implies are checked where they
    // enter: kernels/host_memory.h): a resource error of one line, not an internal one.
    std::cerr << "mactune: error: out of memory while running '" << command_words(app)
              << "' (the request needs more memory than this machine, or its ulimit -v, "
                 "allows: ask for less)\n";
    return 2;
  } catch (const std::length_error&) {
    std::cerr << "mactune: error: out of memory while running '" << command_words(app)
              << "' (the request asks for a buffer larger than any this machine can hold: ask "
                 "for less)\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "mactune: internal error: " << mactune::detail::one_line(e.what()) << '\n';
    return 1;
  }
  return mactune::cli::command_exit_code();
}
