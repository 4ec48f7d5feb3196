#include "kernels/cpu/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <exception>

#include "kernels/error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define MACTUNE_CPU_RELAX() _mm_pause()
#else
#define MACTUNE_CPU_RELAX() ((void)0)
#endif

namespace mactune::cpu {
namespace {

// How long a worker spins for the next job before it sleeps: long enough to bridge the
// phases of a decode step and back-to-back steps, short enough not to burn a shared core.
constexpr auto kSpin = std::chrono::microseconds(50);

constexpr std::uint64_t kField = (1u << 20) - 1;
constexpr std::uint64_t pack(std::uint64_t gen, std::uint64_t tasks, std::uint64_t next) {
  return (gen << 40) | (tasks << 20) | next;
}
constexpr int tasks_of(std::uint64_t c) {
  return static_cast<int>((c >> 20) & kField);
}
constexpr int next_of(std::uint64_t c) {
  return static_cast<int>(c & kField);
}

}  // namespace

int max_worker_threads() {
  return std::max(64, 4 * static_cast<int>(std::thread::hardware_concurrency()));
}

void check_worker_threads(int threads, std::string_view knob) {
  if (threads < 0) input_error(knob, " = ", threads, " must be at least 0 (0: all logical CPUs)");
  const int cap = max_worker_threads();
  if (threads > cap)
    input_error(knob, " = ", threads, ": at most ", cap, " worker threads (4 x this machine's ",
                std::thread::hardware_concurrency(),
                " logical CPUs, and at least 64; more only time-slice the same cores)");
}

std::vector<std::thread> start_threads(int count, const std::function<void(int)>& body,
                                       const std::function<void()>& stop, std::string_view knob,
                                       int asked) {
  std::vector<std::thread> started;
  started.reserve(static_cast<std::size_t>(std::max(count, 0)));
  try {
    for (int w = 1; w <= count; ++w) started.emplace_back(body, w);
  } catch (const std::exception& e) {  // std::system_error (EAGAIN), or std::bad_alloc
    const std::size_t ok = started.size();
    stop();
    for (std::thread& t : started) t.join();
    input_error(knob, " = ", asked, ": could start only ", ok + 1, " of ", count + 1,
                " worker threads (", e.what(),
                "; a thread reserves its stack in the address space: ask for fewer, or raise "
                "ulimit -v / ulimit -u)");
  }
  return started;
}

ThreadPool::ThreadPool(int threads) {
  check_worker_threads(threads);
  size_ = threads > 0 ? threads : static_cast<int>(std::thread::hardware_concurrency());
  size_ = std::clamp(size_, 1, max_worker_threads());
  threads_ = start_threads(
      size_ - 1, [this](int w) { worker_loop(w); },
      [this] {
        stop_.store(true, std::memory_order_release);
        wake();
      },
      "threads", threads > 0 ? threads : size_);
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_release);
  wake();
  for (std::thread& t : threads_) t.join();
}

// A new generation for the spinning workers; the empty critical section orders it against a
// sleeper's check-then-wait, so the notification cannot fall between the two.
void ThreadPool::wake() {
  generation_.fetch_add(1, std::memory_order_acq_rel);
  { std::lock_guard<std::mutex> lock(sleep_mutex_); }
  sleep_cv_.notify_all();
}

void ThreadPool::dispatch(void* closure, void (*call)(void*, int, int), int tasks) {
  MACTUNE_CHECK(tasks <= kMaxTasks, "a pool run takes at most ", kMaxTasks, " tasks, got ", tasks);
  // The previous job is complete (done_ reached its count), so no claim can succeed on it and
  // no worker reads closure_/call_ until it claims a task of the job published below.
  closure_ = closure;
  call_ = call;
  error_ = nullptr;
  failed_.store(false, std::memory_order_relaxed);
  done_.store(0, std::memory_order_relaxed);
  const std::uint64_t gen = (cursor_.load(std::memory_order_relaxed) >> 40) + 1;
  cursor_.store(pack(gen & 0xffffff, static_cast<std::uint64_t>(tasks), 0),
                std::memory_order_release);
  wake();
  work(0);
  // A task still running on a worker: spin, and yield now and then, in case that worker was
  // descheduled by a loaded machine and needs this core back.
  for (int spins = 1; done_.load(std::memory_order_acquire) != tasks; ++spins) {
    MACTUNE_CPU_RELAX();
    if (spins % 1024 == 0) std::this_thread::yield();
  }
  if (error_) std::rethrow_exception(error_);
}

void ThreadPool::work(int worker) {
  std::uint64_t c = cursor_.load(std::memory_order_acquire);
  for (;;) {
    if (next_of(c) >= tasks_of(c)) return;
    if (!cursor_.compare_exchange_weak(c, c + 1, std::memory_order_acq_rel,
                                       std::memory_order_acquire))
      continue;
    // The claimed task is not done, so the caller is still inside this job's dispatch:
    // closure_ and call_ are this job's.
    if (!failed_.load(std::memory_order_relaxed)) {
      try {
        call_(closure_, next_of(c), worker);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex_);
        if (!error_) error_ = std::current_exception();
        failed_.store(true, std::memory_order_relaxed);
      }
    }
    done_.fetch_add(1, std::memory_order_acq_rel);
    c = cursor_.load(std::memory_order_acquire);
  }
}

void ThreadPool::worker_loop(int worker) {
  // The generation at construction, not at thread start: a worker that starts late (a loaded
  // machine) must still see the jobs, and the stop, published before it ran.
  std::uint32_t seen = 0;
  for (;;) {
    std::uint32_t gen = generation_.load(std::memory_order_acquire);
    if (gen == seen) {
      const auto until = std::chrono::steady_clock::now() + kSpin;
      int spins = 0;
      while ((gen = generation_.load(std::memory_order_acquire)) == seen) {
        MACTUNE_CPU_RELAX();
        if (++spins % 64 == 0 && std::chrono::steady_clock::now() > until) {
          std::unique_lock<std::mutex> lock(sleep_mutex_);
          sleep_cv_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
        }
      }
    }
    seen = gen;
    if (stop_.load(std::memory_order_acquire)) return;
    work(worker);
  }
}

}  // namespace mactune::cpu
