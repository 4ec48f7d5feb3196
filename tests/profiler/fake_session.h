// A stand-in decode session for the profiler's tests: it has the step contract (StepSession)
// and reports phases the way an engine does (match, plan, merge on the calling thread; attend on
// `workers` threads at once), spinning a little in each so spans have width. `skip_merge_at`
// leaves merge out of one step, to check that the trace validator notices.
#pragma once

#include <span>
#include <string>
#include <thread>
#include <vector>

#include "kernels/phase.h"
#include "kernels/problem.h"
#include "kernels/session.h"
#include "kernels/stats.h"
#include "profiler/clock.h"

namespace mactune::prof::testing {

class FakeSession {
 public:
  using Result = StepResult;

  FakeSession(const Problem& shape, PhaseSink* sink, int workers = 2, int skip_merge_at = -1)
      : shape_(shape), sink_(sink), workers_(workers), skip_merge_at_(skip_merge_at) {}

  std::string instance_name() const { return "mac_fake_hd128_bf16"; }
  int steps_run() const { return steps_; }

  const Result& step(std::span<const int> requests, std::span<const float> q,
                     std::span<const float> k, std::span<const float> v, bool advance) {
    (void)k, (void)v, (void)advance;
    const std::string inst = instance_name();
    {
      PhaseScope s(sink_, Phase::match, inst);
      spin(2000);
    }
    {
      PhaseScope s(sink_, Phase::plan, inst);
      spin(500);
    }
    {
      PhaseScope s(sink_, Phase::attend, inst);  // the calling thread waits for the workers
      std::vector<std::thread> pool;
      for (int w = 0; w < workers_; ++w)
        pool.emplace_back([&] {
          PhaseScope a(sink_, Phase::attend, inst);
          spin(5000);
        });
      for (auto& t : pool) t.join();
    }
    if (steps_ != skip_merge_at_) {
      PhaseScope s(sink_, Phase::merge, inst);
      spin(1000);
    }
    result_.stats = StepStats{};
    result_.stats.kv_bytes_read = 1000 * static_cast<long long>(requests.size()) + steps_;
    result_.stats.kv_tokens_read = 10;
    result_.stats.kv_tokens_total = 40;
    result_.stats.ring_bytes_read = 64;
    result_.stats.bytes_written = 32;
    result_.stats.hit_heads = static_cast<int>(q.size() / shape_.head_dim) / 2;
    result_.stats.eligible_heads = static_cast<int>(q.size() / shape_.head_dim);
    ++steps_;
    return result_;
  }

 private:
  static void spin(std::int64_t ns) {
    const std::int64_t end = now_ns() + ns;
    while (now_ns() < end) {
    }
  }

  Problem shape_;
  PhaseSink* sink_;
  int workers_, skip_merge_at_;
  int steps_ = 0;
  Result result_;
};

}  // namespace mactune::prof::testing
