// A validating reader of safetensors files (https://github.com/huggingface/safetensors):
//   [8 bytes: little-endian u64 N] [N bytes: UTF-8 JSON header] [tensor bytes]
// The header maps tensor names to {"dtype", "shape", "data_offsets": [begin, end)} (offsets from
// the first byte after the header) and may hold "__metadata__": {string: string}.
//
// Everything is checked before a single tensor byte is read: the header length against the file
// size and a hard cap, the JSON (object of objects, no duplicate names, no unknown keys, depth
// at most 3), dtype names (F32, F16, BF16: what mactune reads), shapes (non-negative, no
// overflow), shape x dtype size = byte range, ranges inside the data section, and — as the
// format requires — ranges that tile the data section exactly (no overlap, no hole, no trailing
// bytes). Every violation throws mactune::InputError with one line naming the source, the
// tensor and the problem. Tensor bytes are read on demand, so a multi-GiB trace is not loaded
// whole to look at its header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "kernels/dtype.h"

namespace mactune::replay {

// Largest header accepted (the reference implementation's limit): a bigger length field is a
// corrupt or hostile file, not a big trace.
inline constexpr std::uint64_t kMaxSafetensorsHeader = 100ull << 20;

struct TensorInfo {
  std::string name;
  DType dtype = DType::f32;
  std::vector<std::int64_t> shape;   // row-major
  std::uint64_t begin = 0, end = 0;  // byte range inside the data section
  std::uint64_t numel() const;
  std::string shape_string() const;  // "[1024, 8, 64]"
};

class Safetensors {
 public:
  // Opens and validates a file. Throws InputError naming `path` on any problem.
  static Safetensors open(const std::string& path);
  // Validates an in-memory image of a whole file (tests, the fuzzer). `bytes` must outlive the
  // returned object; `source` names it in errors.
  static Safetensors from_memory(std::span<const std::byte> bytes, std::string source = "<memory>");

  const std::string& source() const { return source_; }
  std::uint64_t file_size() const { return file_size_; }
  std::uint64_t header_size() const { return header_size_; }
  // Tensors ordered by name; metadata as stored (all strings).
  const std::map<std::string, TensorInfo>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  bool has(const std::string& name) const { return tensors_.count(name) != 0; }
  // Throws InputError "<source>: no tensor '<name>'" when absent.
  const TensorInfo& tensor(const std::string& name) const;
  // The tensor's elements widened to float, row-major. Reads only this tensor's byte range.
  std::vector<float> read_f32(const std::string& name) const;
  // SHA-256 (hex) of the whole file or image, as `sha256sum` prints it.
  std::string sha256() const;

 private:
  Safetensors() = default;
  void parse_header(std::span<const std::byte> header);
  void read_bytes(std::uint64_t offset, std::span<std::byte> out) const;  // data-section offset

  std::string source_;
  std::string path_;                     // empty for in-memory images
  std::span<const std::byte> memory_{};  // the whole image, for in-memory sources
  std::uint64_t file_size_ = 0, header_size_ = 0;
  std::map<std::string, TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

// Safetensors dtype names <-> DType ("F32", "F16", "BF16").
std::string_view safetensors_dtype_name(DType t);

// Serializes tensors (all F32 here, or stored as `dtype`) and metadata into a safetensors
// image, header padded with spaces to a multiple of 8: test fixtures, fuzz seeds and users who
// write traces from C++. Shapes must match the value counts.
struct TensorToWrite {
  std::string name;
  std::vector<std::int64_t> shape;
  std::vector<float> values;
  DType dtype = DType::f32;
};
std::vector<std::byte> write_safetensors(const std::vector<TensorToWrite>& tensors,
                                         const std::map<std::string, std::string>& metadata);

}  // namespace mactune::replay
