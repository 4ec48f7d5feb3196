// SHA-256 (FIPS 180-4) of files and byte strings: the identity of a trace in the database, the
// same digest `sha256sum` prints, so a stored result can be matched to a file by hand.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace mactune::replay {

class Sha256 {
 public:
  Sha256();
  void update(std::span<const std::byte> bytes);
  std::array<std::uint8_t, 32> finish();  // the object is spent afterwards
  static std::string hex(const std::array<std::uint8_t, 32>& digest);

 private:
  void block(const std::uint8_t* p);
  std::array<std::uint32_t, 8> h_;
  std::array<std::uint8_t, 64> buf_{};
  std::size_t buffered_ = 0;
  std::uint64_t total_ = 0;  // bytes
};

std::string sha256_hex(std::span<const std::byte> bytes);
// Streams the file; throws InputError naming it when it cannot be read.
std::string sha256_file(const std::string& path);

}  // namespace mactune::replay
