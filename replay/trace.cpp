// Decode-trace layout checks and loading: see trace.h.
#include "replay/trace.h"

#include <charconv>
#include <cmath>
#include <filesystem>
#include <set>
#include <sstream>

#include "kernels/error.h"

namespace mactune::replay {
namespace {

constexpr const char* kParts[] = {"q_pre", "k_pre", "v", "o_ref"};

// "layer12.q_pre" -> (12, "q_pre"); false for any other name.
bool split_name(const std::string& name, int& layer, std::string& part) {
  if (name.rfind("layer", 0) != 0) return false;
  const char* begin = name.data() + 5;
  const char* end = name.data() + name.size();
  const auto [ptr, ec] = std::from_chars(begin, end, layer);
  if (ec != std::errc() || ptr == begin || ptr == end || *ptr != '.' || layer < 0) return false;
  part.assign(ptr + 1, end);
  for (const char* p : kParts)
    if (part == p) return true;
  return false;
}

double parse_number(const std::string& where, const std::string& text) {
  double x = 0.0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), x);
  if (ec != std::errc() || ptr != text.data() + text.size() || !std::isfinite(x))
    input_error(where, " = '", text, "' is not a number");
  return x;
}

}  // namespace

std::string trace_tensor_name(int layer, const char* what) {
  return "layer" + std::to_string(layer) + "." + what;
}

DecodeTrace DecodeTrace::open(const std::string& path, std::optional<double> rope_theta) {
  return from_file(Safetensors::open(path), rope_theta);
}

DecodeTrace DecodeTrace::from_file(Safetensors file, std::optional<double> rope_theta) {
  DecodeTrace t(std::move(file));
  t.validate(rope_theta);
  return t;
}

std::string DecodeTrace::name() const {
  return std::filesystem::path(source()).filename().string();
}

const std::string& DecodeTrace::sha256() const {
  if (sha256_.empty()) sha256_ = file_.sha256();
  return sha256_;
}

bool DecodeTrace::has_layer(int layer) const {
  for (int l : layers_)
    if (l == layer) return true;
  return false;
}

void DecodeTrace::validate(std::optional<double> rope_theta) {
  const std::string& src = source();
  const auto& meta = file_.metadata();
  std::set<int> layers;
  for (const auto& [name, info] : file_.tensors()) {
    int layer = 0;
    std::string part;
    if (split_name(name, layer, part)) layers.insert(layer);
  }
  if (layers.empty())
    input_error(src, ": no tensor named layer<L>.q_pre / k_pre / v: not a decode trace");
  layers_.assign(layers.begin(), layers.end());

  for (int l : layers_) {
    for (const char* required : {"q_pre", "k_pre", "v"})
      if (!file_.has(trace_tensor_name(l, required)))
        input_error(src, ": layer ", l, " has no tensor '", trace_tensor_name(l, required), "'");
    const TensorInfo& q = file_.tensor(trace_tensor_name(l, "q_pre"));
    const TensorInfo& k = file_.tensor(trace_tensor_name(l, "k_pre"));
    const TensorInfo& v = file_.tensor(trace_tensor_name(l, "v"));
    if (q.shape.size() != 3)
      input_error(src, ": tensor '", q.name, "' has shape ", q.shape_string(),
                  ", expected [steps, q_heads, head_dim]");
    const std::int64_t T = q.shape[0], Hq = q.shape[1], D = q.shape[2];
    if (k.shape.size() != 3 || k.shape[0] != T || k.shape[2] != D)
      input_error(src, ": tensor '", k.name, "' has shape ", k.shape_string(), ", expected [", T,
                  ", kv_heads, ", D, "] to match '", q.name, "' ", q.shape_string());
    if (v.shape != k.shape)
      input_error(src, ": tensor '", v.name, "' has shape ", v.shape_string(), ", expected ",
                  k.shape_string(), " like '", k.name, "'");
    const std::string o_name = trace_tensor_name(l, "o_ref");
    if (file_.has(o_name) && file_.tensor(o_name).shape != q.shape)
      input_error(src, ": tensor '", o_name, "' has shape ", file_.tensor(o_name).shape_string(),
                  ", expected ", q.shape_string(), " like '", q.name, "'");
    if (T < 1 || T > kMaxContext)
      input_error(src, ": tensor '", q.name, "' holds ", T, " steps (expected 1 to ", kMaxContext,
                  ")");
    const std::int64_t Hkv = k.shape[1];
    if (Hq < 1 || Hq > 4096)
      input_error(src, ": tensor '", q.name, "' has ", Hq, " query heads (expected 1 to 4096)");
    if (Hkv < 1 || Hq % Hkv != 0)
      input_error(src, ": layer ", l, ": ", Hkv, " kv heads ('", k.name, "') do not divide ", Hq,
                  " query heads ('", q.name, "')");
    Problem shape;
    shape.q_heads = static_cast<int>(Hq);
    shape.kv_heads = static_cast<int>(Hkv);
    shape.head_dim = D > 4096 ? 4096 : static_cast<int>(D);
    const std::string why = mactune::validate(shape);
    if (!why.empty()) input_error(src, ": layer ", l, ": ", why);
    // Metadata that describes the model must agree with the tensors when it is there.
    const std::pair<const char*, std::int64_t> model_keys[] = {
        {"head_dim", D}, {"n_heads", Hq}, {"n_kv_heads", Hkv}};
    for (const auto& [key, value] : model_keys)
      if (const auto it = meta.find(key);
          it != meta.end() && parse_number(src + ": __metadata__." + key, it->second) != value)
        input_error(src, ": __metadata__.", key, " = ", it->second, " but tensor '", q.name,
                    "' has shape ", q.shape_string(), " (and '", k.name, "' ", k.shape_string(),
                    ")");
    if (const auto it = meta.find("softmax_scale"); it != meta.end()) {
      const double s = parse_number(src + ": __metadata__.softmax_scale", it->second);
      if (std::abs(s * std::sqrt(double(D)) - 1.0) > 1e-6)
        input_error(src, ": __metadata__.softmax_scale = ", it->second,
                    " but mactune attends with 1/sqrt(head_dim) = ", 1.0 / std::sqrt(double(D)));
    }
  }

  if (const auto it = meta.find("layers_included"); it != meta.end()) {
    std::set<int> listed;
    std::stringstream in(it->second);
    for (std::string item; std::getline(in, item, ',');)
      listed.insert(static_cast<int>(parse_number(src + ": __metadata__.layers_included", item)));
    if (listed != layers)
      input_error(src, ": __metadata__.layers_included = '", it->second,
                  "' does not list the layers whose tensors the file holds");
  }
  if (const auto it = meta.find("position_offset");
      it != meta.end() && parse_number(src + ": __metadata__.position_offset", it->second) != 0.0)
    input_error(src, ": __metadata__.position_offset = ", it->second,
                ": only traces that start at position 0 can be replayed");
  if (const auto it = meta.find("rope_convention"); it != meta.end() && it->second != "rotate_half")
    input_error(src, ": __metadata__.rope_convention = '", it->second,
                "': only rotate_half (Llama / GPT-NeoX) is supported");
  if (rope_theta) {
    rope_theta_ = *rope_theta;
  } else {
    const auto it = meta.find("rope_theta");
    if (it == meta.end())
      input_error(src, ": __metadata__ has no rope_theta; give the RoPE base with --rope-theta");
    rope_theta_ = parse_number(src + ": __metadata__.rope_theta", it->second);
  }
  if (!(rope_theta_ > 1.0)) input_error(src, ": RoPE theta ", rope_theta_, " must be > 1");
}

void DecodeTrace::require_layer(int layer) const {
  if (has_layer(layer)) return;
  std::ostringstream have;
  for (std::size_t i = 0; i < layers_.size(); ++i) have << (i ? "," : "") << layers_[i];
  input_error(source(), ": has no layer ", layer, " (it holds layer(s) ", have.str(), ")");
}

TraceLayer DecodeTrace::load_layer(int layer) const {
  require_layer(layer);
  TraceLayer t;
  t.layer = layer;
  const TensorInfo& q = file_.tensor(trace_tensor_name(layer, "q_pre"));
  const TensorInfo& k = file_.tensor(trace_tensor_name(layer, "k_pre"));
  t.steps = static_cast<int>(q.shape[0]);
  t.q_heads = static_cast<int>(q.shape[1]);
  t.head_dim = static_cast<int>(q.shape[2]);
  t.kv_heads = static_cast<int>(k.shape[1]);
  auto load = [&](const char* part, std::vector<float>& out, int heads) {
    const std::string name = trace_tensor_name(layer, part);
    out = file_.read_f32(name);
    for (std::size_t i = 0; i < out.size(); ++i)
      if (!std::isfinite(out[i]) || std::fabs(out[i]) > kMaxTraceMagnitude) {
        const std::size_t per_row = std::size_t(heads) * t.head_dim;
        input_error(source(), ": tensor '", name, "' holds ", out[i], " at [", i / per_row, ", ",
                    i % per_row / t.head_dim, ", ", i % t.head_dim, "]",
                    std::isfinite(out[i]) ? " (beyond the 2^56 a trace value may reach: squared "
                                            "distances and scores in float32 would overflow)"
                                          : "");
      }
  };
  load("q_pre", t.q_pre, t.q_heads);
  load("k_pre", t.k_pre, t.kv_heads);
  load("v", t.v, t.kv_heads);
  if (file_.has(trace_tensor_name(layer, "o_ref"))) load("o_ref", t.o_ref, t.q_heads);
  return t;
}

int DecodeTrace::steps(int layer) const {
  require_layer(layer);
  return static_cast<int>(file_.tensor(trace_tensor_name(layer, "q_pre")).shape[0]);
}

Problem DecodeTrace::problem(int layer, DType kv_dtype) const {
  const TensorInfo& q = file_.tensor(trace_tensor_name(layer, "q_pre"));
  const TensorInfo& k = file_.tensor(trace_tensor_name(layer, "k_pre"));
  Problem p;
  p.batch = 1;
  p.q_heads = static_cast<int>(q.shape[1]);
  p.kv_heads = static_cast<int>(k.shape[1]);
  p.head_dim = static_cast<int>(q.shape[2]);
  p.kv_dtype = kv_dtype;
  return p;
}

}  // namespace mactune::replay
