// mactune: MAC-Attention kernels, tuner, store, dispatch tables and profiler.
// Every error reaches the user as one line on stderr and exit code 2 (bad input or a failed
// operation); a broken invariant or an unexpected exception exits 1 (cli/exit_code.h,
// docs/errors.md).
#include <CLI/CLI.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <new>
#include <stdexcept>
#include <string>

#include "cli/exit_code.h"
#include "cli/options.h"
#include "cli/registry.h"
#include "db/db_error.h"
#include "kernels/error.h"
#include "kernels/file_io.h"
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

// Whatever a command printed must have reached stdout: a full disk or a closed pipe behind it
// (`db export > /dev/full`) is one line and exit 2, not exit 0 with the output lost.
int flush_stdout(int rc) {
  std::cout.flush();
  errno = 0;
  const bool failed = std::fflush(stdout) != 0 || std::ferror(stdout) || !std::cout.good();
  if (!failed) return rc;
  const int err = errno;
  std::cerr << "mactune: error: cannot write to stdout: "
            << (err != 0 ? mactune::detail::errno_text(err)
                         : std::string("a write failed (a full disk, or a closed pipe or device)"))
            << " (the output is incomplete)\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  // SIGINT/SIGTERM/SIGHUP remove every temporary a writer has open, then end the process as
  // the signal says; SIGXFSZ is ignored so a file size limit fails a write (docs/errors.md).
  mactune::install_signal_cleanup();
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
  } catch (...) {
    // What the command printed before it failed goes out first, then the one line.
    std::cout.flush();
    std::fflush(stdout);
    return mactune::cli::report_exception(std::current_exception(), command_words(app), std::cerr);
  }
  return flush_stdout(mactune::cli::command_exit_code());
}
