// The validating safetensors reader: see safetensors.h for what is checked and why.
#include "replay/safetensors.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "kernels/error.h"
#include "kernels/json_error.h"
#include "replay/sha256.h"

namespace mactune::replay {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; this reader copies it as is");

using nlohmann::json;

std::uint64_t TensorInfo::numel() const {
  std::uint64_t n = 1;
  for (std::int64_t d : shape) n *= static_cast<std::uint64_t>(d);  // validated: no overflow
  return n;
}

std::string TensorInfo::shape_string() const {
  std::ostringstream s;
  s << '[';
  for (std::size_t i = 0; i < shape.size(); ++i) s << (i ? ", " : "") << shape[i];
  s << ']';
  return s.str();
}

std::string_view safetensors_dtype_name(DType t) {
  switch (t) {
    case DType::f32:
      return "F32";
    case DType::f16:
      return "F16";
    case DType::bf16:
      return "BF16";
  }
  return "?";
}

namespace {

// The dtypes of the format that mactune cannot read get their own message.
constexpr const char* kOtherSafetensorsDtypes[] = {"F64",     "I64",     "I32",     "I16", "I8",
                                                   "U64",     "U32",     "U16",     "U8",  "BOOL",
                                                   "F8_E4M3", "F8_E5M2", "F8_E8M0", "F4"};

DType parse_st_dtype(const std::string& where, const json& v) {
  if (!v.is_string()) input_error(where, ": \"dtype\" must be a string, got ", v.dump());
  const std::string s = v.get<std::string>();
  if (s == "F32") return DType::f32;
  if (s == "F16") return DType::f16;
  if (s == "BF16") return DType::bf16;
  for (const char* other : kOtherSafetensorsDtypes)
    if (s == other)
      input_error(where, ": dtype ", s, " is not supported (expected F32, F16 or BF16)");
  input_error(where, ": unknown dtype '", s, "' (expected F32, F16 or BF16)");
}

std::uint64_t parse_u64(const std::string& where, const char* what, const json& v) {
  if (!v.is_number_unsigned())
    input_error(where, ": ", what, " must be a non-negative integer, got ", v.dump());
  return v.get<std::uint64_t>();
}

// Keeps the parser honest on hostile input: at most 3 levels (header object, tensor object,
// shape array), no duplicate keys at any level (the JSON library would keep the last silently).
struct HeaderGuard {
  const std::string& source;
  std::set<std::string> top_keys, inner_keys;

  bool operator()(int depth, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        if (depth > 2)
          input_error(source,
                      ": header JSON nests deeper than name -> {dtype, shape, "
                      "data_offsets}");
        if (depth == 1) inner_keys.clear();
        break;
      case json::parse_event_t::key: {
        const std::string key = parsed.get<std::string>();
        if (depth == 1 && !top_keys.insert(key).second)
          input_error(source, ": tensor '", key, "' appears twice in the header");
        if (depth == 2 && !inner_keys.insert(key).second)
          input_error(source, ": key \"", key, "\" appears twice in one header entry");
        break;
      }
      default:
        break;
    }
    return true;
  }
};

}  // namespace

void Safetensors::parse_header(std::span<const std::byte> header) {
  const char* text = reinterpret_cast<const char*>(header.data());
  json doc;
  HeaderGuard guard{source_, {}, {}};
  try {
    doc = json::parse(text, text + header.size(), std::ref(guard));
  } catch (const json::parse_error& e) {
    input_error(source_, ": header is not valid JSON: at its ",
                mactune::detail::json_error_text({text, header.size()}, e.byte, e.what()));
  } catch (const json::exception& e) {
    input_error(
        source_, ": header is not valid JSON: at its ",
        mactune::detail::json_error_text({text, header.size()}, std::string_view::npos, e.what()));
  }
  if (!doc.is_object())
    input_error(source_, ": header must be a JSON object, got ", doc.type_name());

  const std::uint64_t data_size = file_size_ - 8 - header_size_;
  std::vector<const TensorInfo*> by_offset;
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    const std::string& name = it.key();
    const json& entry = it.value();
    if (name == "__metadata__") {
      if (!entry.is_object())
        input_error(source_, ": __metadata__ must be an object of strings, got ",
                    entry.type_name());
      for (auto m = entry.begin(); m != entry.end(); ++m) {
        if (!m.value().is_string())
          input_error(source_, ": __metadata__.", m.key(), " must be a string, got ",
                      m.value().dump());
        metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string where = source_ + ": tensor '" + name + "'";
    if (name.empty()) input_error(source_, ": a tensor has an empty name");
    if (!entry.is_object())
      input_error(where, ": entry must be an object with dtype, shape and data_offsets");
    for (auto k = entry.begin(); k != entry.end(); ++k)
      if (k.key() != "dtype" && k.key() != "shape" && k.key() != "data_offsets")
        input_error(where, ": unknown key \"", k.key(), "\" (expected dtype, shape, data_offsets)");
    for (const char* key : {"dtype", "shape", "data_offsets"})
      if (!entry.contains(key)) input_error(where, ": missing \"", key, "\"");

    TensorInfo t;
    t.name = name;
    t.dtype = parse_st_dtype(where, entry["dtype"]);
    const json& shape = entry["shape"];
    if (!shape.is_array()) input_error(where, ": \"shape\" must be an array, got ", shape.dump());
    if (shape.size() > 16) input_error(where, ": shape has ", shape.size(), " dimensions (max 16)");
    std::uint64_t numel = 1;
    for (const json& d : shape) {
      const std::uint64_t dim = parse_u64(where, "every shape dimension", d);
      if (dim > (1ull << 62) || __builtin_mul_overflow(numel, dim, &numel))
        input_error(where, ": shape ", shape.dump(), " overflows 64-bit element counts");
      t.shape.push_back(static_cast<std::int64_t>(dim));
    }
    const json& offs = entry["data_offsets"];
    if (!offs.is_array() || offs.size() != 2)
      input_error(where, ": \"data_offsets\" must be [begin, end], got ", offs.dump());
    t.begin = parse_u64(where, "data_offsets[0]", offs[0]);
    t.end = parse_u64(where, "data_offsets[1]", offs[1]);
    if (t.begin > t.end)
      input_error(where, ": data_offsets [", t.begin, ", ", t.end, "] end before they begin");
    if (t.end > data_size)
      input_error(where, ": data_offsets [", t.begin, ", ", t.end, "] run past the end of the ",
                  data_size, "-byte data section (file truncated?)");
    std::uint64_t bytes = 0;
    if (__builtin_mul_overflow(numel, dtype_size(t.dtype), &bytes) || bytes != t.end - t.begin)
      input_error(where, ": shape ", t.shape_string(), " x ", safetensors_dtype_name(t.dtype),
                  " needs ", numel, " x ", dtype_size(t.dtype), " bytes, but data_offsets [",
                  t.begin, ", ", t.end, "] hold ", t.end - t.begin);
    by_offset.push_back(&tensors_.emplace(name, std::move(t)).first->second);
  }

  // The byte ranges must tile [0, data_size): sorted by begin, each starts where the last ended.
  std::stable_sort(by_offset.begin(), by_offset.end(),
                   [](const TensorInfo* a, const TensorInfo* b) {
                     return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
                   });
  std::uint64_t covered = 0;
  const TensorInfo* prev = nullptr;
  for (const TensorInfo* t : by_offset) {
    if (t->begin < covered)
      input_error(source_, ": tensor '", t->name, "' bytes [", t->begin, ", ", t->end,
                  ") overlap tensor '", prev->name, "' bytes [", prev->begin, ", ", prev->end, ")");
    if (t->begin > covered)
      input_error(source_, ": bytes [", covered, ", ", t->begin,
                  ") of the data section before tensor '", t->name, "' belong to no tensor");
    covered = t->end;
    prev = t;
  }
  if (covered != data_size)
    input_error(source_, ": the last ", data_size - covered,
                " bytes of the data section belong to no "
                "tensor (file has trailing bytes, or a tensor is missing from the header)");
}

namespace {

// The 8-byte length field and its bounds, shared by files and memory images.
std::uint64_t check_header_length(const std::string& source, std::span<const std::byte> first8,
                                  std::uint64_t file_size) {
  if (file_size < 8)
    input_error(source, ": file is ", file_size,
                " bytes long, too short for the 8-byte header length (truncated?)");
  std::uint64_t n = 0;
  std::memcpy(&n, first8.data(), 8);
  if (n > kMaxSafetensorsHeader)
    input_error(source, ": header length ", n, " exceeds the ", kMaxSafetensorsHeader,
                "-byte limit (not a safetensors file, or corrupt)");
  if (n > file_size - 8)
    input_error(source, ": header length ", n, " runs past the end of the file (", file_size,
                " bytes; truncated?)");
  if (n < 2) input_error(source, ": header length ", n, " is too small to hold a JSON object");
  return n;
}

}  // namespace

Safetensors Safetensors::from_memory(std::span<const std::byte> bytes, std::string source) {
  Safetensors s;
  s.source_ = std::move(source);
  s.memory_ = bytes;
  s.file_size_ = bytes.size();
  s.header_size_ = check_header_length(
      s.source_, bytes.first(std::min<std::size_t>(8, bytes.size())), bytes.size());
  s.parse_header(bytes.subspan(8, s.header_size_));
  return s;
}

Safetensors Safetensors::open(const std::string& path) {
  namespace fs = std::filesystem;
  Safetensors s;
  s.source_ = path;
  s.path_ = path;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) input_error(path, ": no such file");
  if (!fs::is_regular_file(st)) input_error(path, ": not a regular file");
  s.file_size_ = fs::file_size(path, ec);
  if (ec) input_error(path, ": cannot read its size: ", ec.message());
  std::ifstream in(path, std::ios::binary);
  if (!in) input_error(path, ": cannot open for reading");
  std::byte first8[8] = {};
  in.read(reinterpret_cast<char*>(first8), std::min<std::uint64_t>(8, s.file_size_));
  s.header_size_ = check_header_length(path, first8, s.file_size_);
  std::vector<std::byte> header(static_cast<std::size_t>(s.header_size_));
  in.read(reinterpret_cast<char*>(header.data()), static_cast<std::streamsize>(header.size()));
  if (in.gcount() != static_cast<std::streamsize>(header.size()))
    input_error(path, ": could not read the ", s.header_size_, "-byte header (file changed?)");
  s.parse_header(header);
  return s;
}

const TensorInfo& Safetensors::tensor(const std::string& name) const {
  const auto it = tensors_.find(name);
  if (it == tensors_.end()) input_error(source_, ": no tensor '", name, "'");
  return it->second;
}

void Safetensors::read_bytes(std::uint64_t offset, std::span<std::byte> out) const {
  const std::uint64_t at = 8 + header_size_ + offset;
  MACTUNE_CHECK(at + out.size() <= file_size_, "read past the validated data section");
  if (out.empty()) return;  // a zero-element tensor: its span may be null
  if (path_.empty()) {
    std::memcpy(out.data(), memory_.data() + at, out.size());
    return;
  }
  std::ifstream in(path_, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(at));
  in.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(out.size()));
  if (!in || in.gcount() != static_cast<std::streamsize>(out.size()))
    input_error(source_, ": could not read ", out.size(), " bytes at offset ", at,
                " (file truncated or changed since it was opened?)");
}

std::vector<float> Safetensors::read_f32(const std::string& name) const {
  const TensorInfo& t = tensor(name);
  const std::size_t n = static_cast<std::size_t>(t.numel());
  std::vector<float> out(n);
  if (t.dtype == DType::f32) {
    read_bytes(t.begin, std::as_writable_bytes(std::span<float>(out)));
    return out;
  }
  std::vector<std::uint16_t> raw(n);  // F16 / BF16
  read_bytes(t.begin, std::as_writable_bytes(std::span<std::uint16_t>(raw)));
  for (std::size_t i = 0; i < n; ++i)
    out[i] = t.dtype == DType::f16 ? f16_to_float(f16_t{raw[i]}) : bf16_to_float(bf16_t{raw[i]});
  return out;
}

std::string Safetensors::sha256() const {
  return path_.empty() ? sha256_hex(memory_) : sha256_file(path_);
}

std::vector<std::byte> write_safetensors(const std::vector<TensorToWrite>& tensors,
                                         const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<std::byte> data;
  for (const TensorToWrite& t : tensors) {
    std::uint64_t numel = 1;
    for (std::int64_t d : t.shape) numel *= static_cast<std::uint64_t>(d);
    MACTUNE_CHECK(numel == t.values.size(), "tensor '", t.name, "': shape holds ", numel,
                  " values, got ", t.values.size());
    const std::size_t begin = data.size();
    const std::size_t elem = dtype_size(t.dtype);
    data.resize(begin + t.values.size() * elem);
    for (std::size_t i = 0; i < t.values.size(); ++i) {  // memcpy: ranges need not be aligned
      alignas(4) std::byte word[4];
      store_from_float(t.dtype, word, 0, t.values[i]);
      std::memcpy(data.data() + begin + i * elem, word, elem);
    }
    header[t.name] = {{"dtype", safetensors_dtype_name(t.dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {begin, data.size()}}};
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::vector<std::byte> out(8 + text.size() + data.size());
  const std::uint64_t n = text.size();
  std::memcpy(out.data(), &n, 8);
  std::memcpy(out.data() + 8, text.data(), text.size());
  if (!data.empty()) std::memcpy(out.data() + 8 + text.size(), data.data(), data.size());
  return out;
}

}  // namespace mactune::replay
