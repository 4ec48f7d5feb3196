// `mactune predict --db DB --context 1M --batch 128 [shape flags]`: fits the cost model of a
// device to its stored measurements and predicts decode steps it may never have measured, with
// the predicted break-even hit rate; `--fit-context 4K,16K` fits to those contexts only, so the
// other measured contexts show the error outside what the model saw. `--model` also prints
// the models and where the grid is too coarse for them. Reads the database only.
#include <iostream>
#include <map>
#include <optional>
#include <sstream>

#include "cli/registry.h"
#include "db/store.h"
#include "kernels/cpu/engine_config.h"
#include "kernels/cuda/engine_config.h"
#include "kernels/device.h"
#include "kernels/error.h"
#include "tuner/decide/model_io.h"
#include "tuner/decide/predict.h"
#include "tuner/spec/expr.h"

namespace mactune::cli {
namespace {

struct PredictArgs {
  std::string db, device = "auto";
  std::vector<std::string> contexts, batches, hit_rates, fit_contexts;
  int q_heads = 0, kv_heads = 0, head_dim = 0, page_size = 0, K = 0, r = 0;
  std::string dtype, lag, coherence, params;
  bool model = false;
  // The shape and MAC flags given on the command line: an unset one means "the database's",
  // a given one is checked whatever its value (`--q-heads 0` is refused, not "unset").
  std::map<std::string, const CLI::Option*> options;
  bool given(const std::string& flag) const { return options.at(flag)->count() > 0; }
};

// "64K", "1M", "4096" (also comma lists inside one value) as positive integers.
std::vector<int> counts(const std::vector<std::string>& texts, const char* flag) {
  std::vector<int> out;
  for (const std::string& t : texts) {
    std::istringstream in(t);
    std::string one;
    while (std::getline(in, one, ',')) {
      const auto v = parse_real(one);
      MACTUNE_REQUIRE(v && *v >= 1 && *v <= (1 << 30) && *v == static_cast<int>(*v), flag, " '",
                      one, "' is not a positive integer (4096, 64K, 1M)");
      out.push_back(static_cast<int>(*v));
    }
  }
  return out;
}

std::vector<double> rates(const std::vector<std::string>& texts) {
  std::vector<double> out;
  for (const std::string& t : texts) {
    std::istringstream in(t);
    std::string one;
    while (std::getline(in, one, ',')) {
      const auto v = parse_real(one);
      MACTUNE_REQUIRE(v && *v >= 0 && *v <= 1, "--hit-rate '", one, "' is not in [0, 1]");
      out.push_back(*v);
    }
  }
  return out;
}

template <class T>
std::optional<T> given(const PredictArgs& a, const std::string& flag, const T& v) {
  return a.given(flag) ? std::optional<T>(v) : std::nullopt;
}

// --params: the launch parameters of the device's engine, each checked by its field
// (threads=0,chunk_tokens=256,block_rows=16 on a CPU).
void check_params(Backend backend, const std::string& text) {
  try {
    if (backend == Backend::cuda) {
      cuda::EngineConfig c;
      parse_fields_text(c, text);
    } else {
      cpu::EngineConfig c;
      parse_fields_text(c, text);
    }
  } catch (const InputError& e) {
    input_error("--params '", text, "': ", e.what(), " (the ", backend,
                " engine's launch parameters, e.g. threads=0,chunk_tokens=256,block_rows=16)");
  }
}

void run(const PredictArgs& a) {
  const db::Store store = db::Store::open(a.db, {.mode = db::OpenMode::read_only});
  const tuner::Selection sel = tuner::select_rows(store, a.device, cpu_fingerprint());
  DeviceFingerprint device;
  for (const auto& d : store.devices())
    if (d.id == sel.device_id) device = d.fingerprint;
  const auto rows = tuner::load_model_rows(store, sel);
  tuner::PredictRequest req;
  req.contexts = counts(a.contexts, "--context");
  req.batches = counts(a.batches, "--batch");
  req.hit_rates = rates(a.hit_rates);
  req.fit_contexts = counts(a.fit_contexts, "--fit-context");
  req.q_heads = given(a, "--q-heads", a.q_heads);
  req.kv_heads = given(a, "--kv-heads", a.kv_heads);
  req.head_dim = given(a, "--head-dim", a.head_dim);
  req.page_size = given(a, "--page-size", a.page_size);
  req.K = given(a, "--K", a.K);
  req.r = given(a, "--r", a.r);
  req.dtype = given(a, "--dtype", a.dtype);
  req.lag = given(a, "--lag", a.lag);
  req.coherence = given(a, "--coherence", a.coherence);
  req.params = given(a, "--params", a.params);
  if (req.params) check_params(device.backend, *req.params);
  const tuner::Prediction p = tuner::predict(rows, device, req);
  std::cout << tuner::prediction_markdown(p);
  if (a.model) std::cout << '\n' << tuner::model_markdown(p.models, rows);
}

void add_predict(CLI::App& app) {
  auto a = std::make_shared<PredictArgs>();
  auto* cmd = app.add_subcommand(
      "predict", "Predict decode-step times and break-even from a database's fitted cost model");
  cmd->add_option("--db", a->db, "Database written by mactune tune")->required();
  cmd->add_option("--device", a->device,
                  "auto (this machine, or the only device), a fingerprint digest or a name glob");
  cmd->add_option("--context", a->contexts, "KV tokens per request (4096, 64K, 1M; lists)")
      ->required();
  cmd->add_option("--batch", a->batches, "Requests per step (lists)")->required();
  cmd->add_option("--hit-rate", a->hit_rates, "Forced hit rates (default 0,0.5,0.9,1)");
  cmd->add_option("--fit-context", a->fit_contexts,
                  "Fit only to measurements at these contexts (default: all)");
  a->options["--q-heads"] = cmd->add_option(
      "--q-heads", a->q_heads,
      "Query heads (default: the database's shape; each shape flag given is checked)");
  a->options["--kv-heads"] = cmd->add_option("--kv-heads", a->kv_heads, "KV heads");
  a->options["--head-dim"] = cmd->add_option("--head-dim", a->head_dim, "Head dimension");
  a->options["--page-size"] = cmd->add_option("--page-size", a->page_size, "Tokens per KV page");
  a->options["--dtype"] = cmd->add_option("--dtype", a->dtype, "KV dtype (bf16, f16, f32)");
  a->options["--K"] = cmd->add_option("--K", a->K, "Ring capacity");
  a->options["--r"] = cmd->add_option("--r", a->r, "Band");
  a->options["--lag"] =
      cmd->add_option("--lag", a->lag, "Lag distribution of forced hits, e.g. uniform(1,64)");
  a->options["--coherence"] = cmd->add_option("--coherence", a->coherence, "per-head or per-group");
  a->options["--params"] = cmd->add_option(
      "--params", a->params, "Launch parameters, e.g. threads=0,chunk_tokens=256,block_rows=16");
  cmd->add_flag("--model", a->model,
                "Also print the models' coefficients and where the grid is too coarse");
  cmd->callback([a] { run(*a); });
}

const bool registered_predict = register_command("predict", add_predict);

}  // namespace
}  // namespace mactune::cli
