#include "profiler/activity.h"

#include <algorithm>

namespace mactune::prof {
namespace {

class NullCollector final : public ActivityCollector {
 public:
  explicit NullCollector(std::string reason) : reason_(std::move(reason)) {}
  std::string_view kind() const override { return "null"; }
  bool active() const override { return false; }
  std::string status() const override { return reason_; }
  void start() override {}
  void stop() override {}
  ActivityLog take() override { return {}; }

 private:
  std::string reason_;
};

}  // namespace

std::unique_ptr<ActivityCollector> make_null_collector(std::string reason) {
  return std::make_unique<NullCollector>(std::move(reason));
}

ActivityLog FakeCollector::take() {
  ActivityLog out = std::move(log_);
  log_ = {};
  sort_by_start(out);
  return out;
}

void sort_by_start(ActivityLog& log) {
  auto by_start = [](const auto& a, const auto& b) { return a.start_ns < b.start_ns; };
  std::stable_sort(log.device.begin(), log.device.end(), by_start);
  std::stable_sort(log.api.begin(), log.api.end(), by_start);
  std::stable_sort(log.sync.begin(), log.sync.end(), by_start);
}

}  // namespace mactune::prof
