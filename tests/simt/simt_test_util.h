// Shared pieces of the simt tests: device buffers over the interpreter's runtime API and a
// guard that collects the reports of one test.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "kernels/cuda/simt/runtime.h"

namespace mactune::simt::testing {

template <class T>
struct DeviceArray {
  T* p = nullptr;
  std::size_t n = 0;
  explicit DeviceArray(std::size_t count) : n(count) {
    EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&p), count * sizeof(T)), cudaSuccess);
    cudaMemset(p, 0, count * sizeof(T));
  }
  explicit DeviceArray(const std::vector<T>& h) : DeviceArray(h.size()) { upload(h); }
  ~DeviceArray() { cudaFree(p); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  void upload(const std::vector<T>& h) {
    ASSERT_EQ(cudaMemcpy(p, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  }
  std::vector<T> download() const {
    std::vector<T> h(n);
    EXPECT_EQ(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
  }
};

// Clears the reports and launch records, on entry and on exit (a later test in the same process,
// as the mutation check runs them, starts with none); with `expect_reports`, launches that
// report do not fail and nothing is printed (the test inspects the reports itself).
struct ReportScope {
  explicit ReportScope(bool expect_reports = false) {
    clear_reports();
    clear_launches();
    cudaGetLastError();
    options().fail_on_report = !expect_reports;
    options().print_reports = !expect_reports;
  }
  ~ReportScope() {
    clear_reports();
    clear_launches();
    options().fail_on_report = true;
    options().print_reports = true;
    cudaGetLastError();
  }
  static std::string all() {
    std::string s;
    for (const Report& r : reports()) s += std::string(check_name(r.check)) + ": " + r.text + "\n";
    return s;
  }
  static const Report* first(Check c) {
    for (const Report& r : reports())
      if (r.check == c) return &r;
    return nullptr;
  }
};

}  // namespace mactune::simt::testing
