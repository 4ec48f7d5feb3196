// The parts of profiler/dram.h that need no CUPTI, and the stand-ins of builds without it.
#include "profiler/dram.h"

#include <cmath>

#include "kernels/error.h"
#include "profiler/activity.h"

namespace mactune::prof {

const std::vector<std::string>& default_dram_metrics() {
  static const std::vector<std::string> m = {"dram__bytes_read.sum", "dram__bytes_write.sum",
                                             "lts__t_sectors_srcunit_tex_op_read.sum"};
  return m;
}

double CounterResult::value(const std::string& metric) const {
  for (std::size_t i = 0; i < metrics.size() && i < values.size(); ++i)
    if (metrics[i] == metric) return values[i];
  return std::nan("");
}

DramComparison compare_dram(std::string label, const CounterResult& m, double modeled_read,
                            double modeled_write) {
  DramComparison c;
  c.label = std::move(label);
  c.measured_read = m.value("dram__bytes_read.sum");
  c.measured_write = m.value("dram__bytes_write.sum");
  c.l2_requested = 32.0 * m.value("lts__t_sectors_srcunit_tex_op_read.sum");
  c.modeled_read = modeled_read;
  c.modeled_write = modeled_write;
  return c;
}

#if !MACTUNE_HAVE_CUPTI

struct CounterConfig::Impl {};
struct RangeCounter::Impl {};

std::vector<std::string> supported_chips() {
  return {};
}

CounterConfig::CounterConfig(std::string, std::vector<std::string>,
                             const std::vector<std::uint8_t>&) {
  throw Error("hardware counters need CUPTI: this build has none (MACTUNE_ENABLE_CUPTI=OFF)");
}
CounterConfig::~CounterConfig() = default;
CounterConfig::CounterConfig(CounterConfig&&) noexcept = default;
CounterConfig& CounterConfig::operator=(CounterConfig&&) noexcept = default;
const std::string& CounterConfig::chip() const {
  throw Error("no CUPTI");
}
const std::vector<std::string>& CounterConfig::metrics() const {
  throw Error("no CUPTI");
}
std::size_t CounterConfig::passes() const {
  return 0;
}
const std::vector<std::uint8_t>& CounterConfig::image() const {
  throw Error("no CUPTI");
}
std::vector<double> CounterConfig::evaluate(const std::vector<std::uint8_t>&, std::size_t) const {
  throw Error("no CUPTI");
}
std::string CounterConfig::description(const std::string&) const {
  return {};
}

bool RangeCounter::available(std::string* why) {
  if (why) *why = "hardware counters need CUPTI: this build has none";
  return false;
}
RangeCounter::RangeCounter(std::vector<std::string>) {
  throw Error("hardware counters need CUPTI: this build has none");
}
RangeCounter::~RangeCounter() = default;
const std::string& RangeCounter::chip() const {
  throw Error("no CUPTI");
}
CounterResult RangeCounter::measure(const std::function<void()>&, const std::string&) {
  throw Error("no CUPTI");
}

#endif

}  // namespace mactune::prof
