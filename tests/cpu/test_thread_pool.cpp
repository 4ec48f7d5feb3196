// The thread pool's creation (issue 30): a count above the machine's bound is refused by
// name; when the system cannot start the threads (no address space for their stacks), the
// ones started are joined and the constructor throws one line: never std::terminate ("called
// without an active exception"), never a wait on a worker that never started.
#include <gtest/gtest.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

#include "kernels/cpu/thread_pool.h"
#include "kernels/error.h"

namespace mactune::cpu {
namespace {

std::string error_of(int threads) {
  try {
    ThreadPool pool(threads);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(ThreadPool, CountAboveTheMachineBoundIsRefused) {
  const int cap = max_worker_threads();
  EXPECT_GE(cap, 64);
  const std::string e = error_of(cap + 1);
  EXPECT_NE(e.find("threads = " + std::to_string(cap + 1)), std::string::npos) << e;
  EXPECT_NE(e.find("at most " + std::to_string(cap)), std::string::npos) << e;
  EXPECT_NE(error_of(-1).find("must be at least 0"), std::string::npos);
  EXPECT_EQ(error_of(2), "");
}

// In a child process (its address-space limit stays there): a pool of 48 threads with 64 MiB
// stacks needs 3 GiB of address space; the limit leaves room for a few (512 MiB). The child exits 0
// when the constructor threw the expected line, 3 when it did not throw; a std::terminate would be
// SIGABRT, a hang the parent's timeout.
TEST(ThreadPool, CreationFailureJoinsTheStartedAndThrowsOneLine) {
  std::fflush(nullptr);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    long long vm_pages = 0;
    std::ifstream("/proc/self/statm") >> vm_pages;
    const rlim_t used = static_cast<rlim_t>(vm_pages) * static_cast<rlim_t>(sysconf(_SC_PAGESIZE));
    const rlimit as{used + (512ull << 20), used + (512ull << 20)};
    // Threads of 64 MiB stacks (glibc read RLIMIT_STACK at start-up: set the default itself).
    pthread_attr_t attr;
    if (pthread_attr_init(&attr) != 0 || pthread_attr_setstacksize(&attr, 64ull << 20) != 0 ||
        pthread_setattr_default_np(&attr) != 0 || setrlimit(RLIMIT_AS, &as) != 0)
      _exit(4);
    try {
      ThreadPool pool(48);
    } catch (const InputError& e) {
      const std::string m = e.what();
      const bool ok = m.find("threads = 48: could start only ") != std::string::npos &&
                      m.find(" of 48 worker threads") != std::string::npos &&
                      m.find('\n') == std::string::npos;
      if (!ok) std::fprintf(stderr, "unexpected message: %s\n", m.c_str());
      _exit(ok ? 0 : 5);
    }
    _exit(3);
  }
  int status = 0;
  for (int i = 0; i < 600 && waitpid(pid, &status, WNOHANG) == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  if (waitpid(pid, &status, WNOHANG) == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    FAIL() << "the pool hung (30 s) when its threads could not start";
  }
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status)
                                 << " (SIGABRT: std::terminate)";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "3: no error at all; 4: setrlimit; 5: wrong message";
}

}  // namespace
}  // namespace mactune::cpu
