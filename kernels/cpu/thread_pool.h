// A persistent pool of worker threads that pull task indices from one atomic counter.
//
// run(tasks, f) calls f(task, worker) for every task in [0, tasks) on all workers, the calling
// thread included (it is worker 0), and returns when every task is done; the first exception a
// task throws is rethrown in the caller, and the tasks not yet started are skipped. Workers spin
// for a short while between runs (the phases of one decode step follow each other within
// microseconds), then sleep on a condition variable, so an idle pool costs nothing. (Not
// std::atomic::wait: libstdc++ 12 can lose its notifications, which hung workers here.)
//
// Tasks are claimed from one 64-bit cursor (job generation, task count, next task), so the
// caller waits only for tasks that were claimed, never for a worker that has yet to wake up:
// on a loaded machine a late worker simply finds nothing (or the next job) to do.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <string_view>
#include <thread>
#include <vector>

namespace mactune::cpu {

// The most worker threads one pool (or one replay's exact attention) may start: 4 x the
// logical CPUs, and at least 64. More threads than cores only time-slice the same cores (the
// pool's tasks are compute-bound), so beyond a few times the cores a count is a typo or a
// hostile input; each thread also reserves a stack (8 MiB of address space by default), so
// `threads: 1024` is 8 GiB of address space before any work. 64 keeps tests of
// oversubscription possible on small machines.
int max_worker_threads();

// InputError "threads = N: ..." when N is above max_worker_threads() or negative. `knob` names
// where the count came from (a flag, a spec key), as the message's first word.
void check_worker_threads(int threads, std::string_view knob = "threads");

// Starts `count` threads running body(i) for i in [1, count] (the caller is worker 0 and runs
// nothing here). When the system refuses a thread (std::system_error: no memory for its stack,
// a process or thread limit), calls `stop` so that the started ones return, joins them, and
// throws InputError naming the knob, how many were asked for and how many could start: never
// a std::terminate from a joinable std::thread, never a wait on a worker that does not exist.
std::vector<std::thread> start_threads(int count, const std::function<void(int)>& body,
                                       const std::function<void()>& stop, std::string_view knob,
                                       int asked);

class ThreadPool {
 public:
  // threads: total workers including the caller; 0 = all logical CPUs. InputError when the
  // count is above max_worker_threads(), or when the system cannot start them all (the ones
  // started are joined first).
  explicit ThreadPool(int threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return size_; }

  template <class F>
  void run(int tasks, F&& f) {
    if (tasks <= 0) return;
    if (size_ == 1 || tasks == 1) {
      for (int t = 0; t < tasks; ++t) f(t, 0);
      return;
    }
    using Fn = std::remove_reference_t<F>;
    dispatch(
        const_cast<void*>(static_cast<const void*>(&f)),
        [](void* c, int t, int w) { (*static_cast<Fn*>(c))(t, w); }, tasks);
  }

  static constexpr int kMaxTasks = (1 << 20) - 1;

 private:
  void dispatch(void* closure, void (*call)(void*, int, int), int tasks);
  void wake();
  void work(int worker);
  void worker_loop(int worker);

  int size_ = 1;
  std::vector<std::thread> threads_;
  // The current job. Written only while no task of the previous job is claimed or running.
  void* closure_ = nullptr;
  void (*call_)(void*, int, int) = nullptr;
  // [generation: 24 | tasks: 20 | next: 20]; a claim is a CAS that bumps next.
  std::atomic<std::uint64_t> cursor_{0};
  std::atomic<int> done_{0};                  // tasks of the current job finished (or skipped)
  std::atomic<std::uint32_t> generation_{0};  // bumped per job
  std::mutex sleep_mutex_;                    // sleeping workers wait on sleep_cv_ for a new
  std::condition_variable sleep_cv_;          // generation, checked under sleep_mutex_
  std::atomic<bool> stop_{false};
  std::atomic<bool> failed_{false};
  std::mutex error_mutex_;
  std::exception_ptr error_;
};

}  // namespace mactune::cpu
