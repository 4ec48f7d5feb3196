// DRAM bytes per kernel range through CUPTI's range profiler (CUDA 12.6+ host API + range
// profiler), to check the modeled KV bytes of kernels/stats.h against the hardware.
//
// Host side (CounterConfig): validates metric names against the chip's metric list and builds
// the config image; needs no GPU ("GH100" is H100/H200), so it is unit-tested everywhere.
// Target side (RangeCounter): one user range around the work, replayed once per pass with an L2
// flush before each, so bytes already in L2 from the previous pass are not missed. Counter runs
// perturb timing: never take timings from them.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace mactune::prof {

// dram__bytes_read.sum (HBM reads), dram__bytes_write.sum, and the L2 read sectors the SMs
// requested (x 32 B: what was asked for, whether or not L2 held it). One pass on GH100.
const std::vector<std::string>& default_dram_metrics();

// Chips CUPTI's host API knows ("GA100", "GH100", ...). Empty in builds without CUPTI.
std::vector<std::string> supported_chips();

class CounterConfig {
 public:
  // Throws InputError naming the chip or the first unknown metric (names are checked against the
  // chip's base metrics before any is added: one bad name poisons a CUPTI host object).
  CounterConfig(std::string chip, std::vector<std::string> metrics,
                const std::vector<std::uint8_t>& counter_availability = {});
  ~CounterConfig();
  CounterConfig(CounterConfig&&) noexcept;
  CounterConfig& operator=(CounterConfig&&) noexcept;

  const std::string& chip() const;
  const std::vector<std::string>& metrics() const;
  std::size_t passes() const;  // replays needed to collect every metric
  const std::vector<std::uint8_t>& image() const;
  // Evaluates the metrics for range `range` of a decoded counter-data image.
  std::vector<double> evaluate(const std::vector<std::uint8_t>& counter_data,
                               std::size_t range) const;
  std::string description(const std::string& metric) const;  // CUPTI's one-line description

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct CounterResult {
  std::vector<std::string> metrics;
  std::vector<double> values;  // same order as metrics
  std::size_t passes = 0;
  double value(const std::string& metric) const;  // NaN when not measured
};

// Measures metrics over `work` on the current CUDA device. `work` must launch the same kernels
// each time it is called (it is replayed once per pass) and may synchronize.
class RangeCounter {
 public:
  // Whether counters can be collected here; `why` gets one line when not (no CUPTI in this
  // build, no usable GPU). Permission problems surface at the first measure().
  static bool available(std::string* why = nullptr);

  explicit RangeCounter(std::vector<std::string> metrics = default_dram_metrics());
  ~RangeCounter();
  RangeCounter(const RangeCounter&) = delete;
  RangeCounter& operator=(const RangeCounter&) = delete;

  const std::string& chip() const;
  CounterResult measure(const std::function<void()>& work, const std::string& range_name);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Measured DRAM bytes next to the modeled ones for one kind of step.
struct DramComparison {
  std::string label;          // e.g. "mac step", "full attention step"
  double measured_read = 0;   // dram__bytes_read.sum
  double l2_requested = 0;    // lts__t_sectors_srcunit_tex_op_read.sum x 32
  double measured_write = 0;  // dram__bytes_write.sum
  double modeled_read = 0;    // StepStats kv_bytes_read + ring_bytes_read
  double modeled_write = 0;   // StepStats bytes_written
  double read_ratio() const { return modeled_read > 0 ? measured_read / modeled_read : 0.0; }
};

DramComparison compare_dram(std::string label, const CounterResult& measured, double modeled_read,
                            double modeled_write);

}  // namespace mactune::prof
