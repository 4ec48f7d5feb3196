#include "profiler/cpu_tracer.h"

#include <pthread.h>

#include <algorithm>
#include <fstream>

#include "profiler/clock.h"

namespace mactune::prof {
namespace {

std::atomic<std::uint64_t> next_serial{1};

// The calling thread's buffer in the tracer it used last: one compare on the fast path.
struct LocalCache {
  std::uint64_t serial = 0;
  void* buffer = nullptr;
};
thread_local LocalCache cache;

std::string current_thread_name() {
  char name[32] = {};
  if (pthread_getname_np(pthread_self(), name, sizeof name) != 0) return {};
  return name;
}

}  // namespace

CpuPhaseTracer::CpuPhaseTracer() : serial_(next_serial.fetch_add(1)) {
  instances_.emplace_back();  // id 0: no instance
}

CpuPhaseTracer::~CpuPhaseTracer() = default;

CpuPhaseTracer::Buffer& CpuPhaseTracer::local() {
  if (cache.serial == serial_) return *static_cast<Buffer*>(cache.buffer);
  const std::int64_t tid = os_thread_id();
  std::lock_guard lock(mutex_);
  Buffer* b = nullptr;
  for (auto& p : buffers_)
    if (p->data.os_tid == tid) b = p.get();
  if (!b) {
    buffers_.push_back(std::make_unique<Buffer>());
    b = buffers_.back().get();
    b->data.os_tid = tid;
    b->data.cupti_tid = cupti_thread_id();
    b->data.name = current_thread_name();
    b->data.spans.reserve(4096);
  }
  cache = {serial_, b};
  return *b;
}

void CpuPhaseTracer::set_default_instance(std::string_view instance) {
  std::lock_guard lock(mutex_);
  auto it = std::find(instances_.begin(), instances_.end(), instance);
  if (it == instances_.end()) it = instances_.insert(instances_.end(), std::string(instance));
  default_instance_ = static_cast<std::uint16_t>(it - instances_.begin());
}

std::uint16_t CpuPhaseTracer::intern(Buffer& b, std::string_view instance) {
  if (instance.empty()) return default_instance_;
  if (b.last_instance_id != 0 && instance == b.last_instance) return b.last_instance_id;
  std::lock_guard lock(mutex_);
  auto it = std::find(instances_.begin(), instances_.end(), instance);
  if (it == instances_.end()) {
    if (instances_.size() >= 0xffff) return 0;
    instances_.emplace_back(instance);
    it = instances_.end() - 1;
  }
  b.last_instance = instance;
  b.last_instance_id = static_cast<std::uint16_t>(it - instances_.begin());
  return b.last_instance_id;
}

void CpuPhaseTracer::begin(Phase phase, std::string_view instance) {
  Buffer& b = local();
  const bool on = recording() && !(ignored_ >> static_cast<unsigned>(phase) & 1u);
  b.open.push_back({phase, on ? intern(b, instance) : std::uint16_t{0}, on, now_ns()});
}

void CpuPhaseTracer::end(Phase phase) {
  const std::int64_t t = now_ns();
  Buffer& b = local();
  if (b.open.empty() || b.open.back().phase != phase) {
    ++b.data.unmatched_ends;
    return;
  }
  const Open o = b.open.back();
  b.open.pop_back();
  if (o.recorded)
    b.data.spans.push_back(
        {o.phase, o.instance, static_cast<std::uint16_t>(b.open.size()), o.start_ns, t});
}

void CpuPhaseTracer::register_thread(std::string name) {
  Buffer& b = local();
  if (name.empty()) return;
  std::lock_guard lock(mutex_);  // threads() may copy the name concurrently
  b.data.name = std::move(name);
  b.data.named = true;
}

void CpuPhaseTracer::add_span(Span span) {
  local().data.extra.push_back(std::move(span));
}

std::vector<ThreadSpans> CpuPhaseTracer::threads() const {
  std::lock_guard lock(mutex_);
  std::vector<ThreadSpans> out;
  for (const auto& b : buffers_) out.push_back(b->data);
  return out;
}

std::vector<std::string> CpuPhaseTracer::instances() const {
  std::lock_guard lock(mutex_);
  return instances_;
}

void CpuPhaseTracer::add_to(Timeline& timeline, int pid) const {
  const auto names = instances();
  const auto threads = this->threads();
  // A thread that never set its own name carries the process name: call it a worker.
  const std::string process_comm = [] {
    std::ifstream in("/proc/self/comm");
    std::string comm;
    std::getline(in, comm);
    return comm;
  }();
  int worker = 0;
  for (std::size_t i = 0; i < threads.size(); ++i) {
    const ThreadSpans& t = threads[i];
    const bool own_name = t.named || (!t.name.empty() && t.name != process_comm);
    const std::string name = own_name ? t.name : "worker " + std::to_string(++worker);
    timeline.name_thread(pid, t.os_tid, name, static_cast<int>(i) + (t.named ? 0 : 100));
    for (const PhaseSpan& s : t.spans) {
      Span span{std::string(name_of(s.phase)), "phase", pid, t.os_tid, s.start_ns, s.end_ns, {}};
      if (s.instance != 0 && s.instance < names.size())
        span.args.push_back({"instance", names[s.instance]});
      timeline.add(std::move(span));
    }
    for (Span s : t.extra) {
      s.pid = pid;
      s.tid = t.os_tid;
      timeline.add(std::move(s));
    }
  }
}

}  // namespace mactune::prof
