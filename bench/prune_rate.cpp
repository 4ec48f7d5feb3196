// The pruned match's pruning rate on real decode traces: per trace, layer, pick rule, K and
// tau, the ring rows read in full per eligible head-step by match = pruned, against the
// candidates the exhaustive scan reads (StepStats::match_rows_read of two cpu::Sessions, which
// decide alike; the program checks that too). Markdown on stdout.
//   prune_rate [--r R] TRACE.safetensors...
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "kernels/cpu/session.h"
#include "replay/trace.h"

using namespace mactune;

int main(int argc, char** argv) {
  int band = 64;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--r") == 0 && i + 1 < argc)
      band = std::atoi(argv[++i]);
    else
      files.emplace_back(argv[i]);
  }
  if (files.empty()) {
    std::fprintf(stderr, "usage: prune_rate [--r R] TRACE.safetensors...\n");
    return 2;
  }
  try {
    std::printf(
        "| trace | layer | pick | K | tau | hit rate | rows read / head-step (scan) | "
        "rows read / head-step (pruned) | read |\n|---|---|---|---|---|---|---|---|---|\n");
    for (const std::string& f : files) {
      const replay::DecodeTrace trace = replay::DecodeTrace::open(f);
      for (const int layer : trace.layers()) {
        const replay::TraceLayer L = trace.load_layer(layer);
        for (const PickRule pick : {PickRule::nearest, PickRule::newest})
          for (const int K : {256, 512})
            for (const double tau : {0.45, 0.6, 0.75}) {
              cpu::SessionOptions o;
              o.shape.batch = 1;
              o.shape.q_heads = L.q_heads;
              o.shape.kv_heads = L.kv_heads;
              o.shape.head_dim = L.head_dim;
              o.shape.kv_dtype = DType::f32;
              o.mac.ring_capacity = K;
              o.mac.band = band;
              o.mac.min_context = K;  // a full ring from the first eligible step
              o.mac.tau = tau;
              o.mac.pick = pick;
              o.rope_theta = trace.rope_theta();
              o.max_context = L.steps;
              cpu::SessionOptions p = o;
              p.engine.match_mode = MatchMode::pruned;
              cpu::Session a(o), b(p);
              const int id = a.add_request();
              b.add_request();
              const std::span<const int> ids(&id, 1);
              const std::size_t nq = std::size_t(L.q_heads) * L.head_dim;
              const std::size_t nk = std::size_t(L.kv_heads) * L.head_dim;
              long long heads = 0, hits = 0, rows_a = 0, rows_b = 0, differ = 0;
              for (int t = 0; t < L.steps; ++t) {
                const std::span<const float> q(L.q_row(t), nq), k(L.k_row(t), nk),
                    v(L.v_row(t), nk);
                const auto& x = a.step(ids, q, k, v);
                const auto& y = b.step(ids, q, k, v);
                for (std::size_t h = 0; h < x.decisions.size(); ++h) {
                  heads += x.decisions[h].eligible;
                  hits += x.decisions[h].hit;
                  differ += x.decisions[h].hit != y.decisions[h].hit ||
                            x.decisions[h].p != y.decisions[h].p;
                }
                rows_a += x.stats.match_rows_read;
                rows_b += y.stats.match_rows_read;
              }
              if (differ) {
                std::fprintf(stderr, "%s layer %d: %lld decisions differ\n", f.c_str(), layer,
                             differ);
                return 1;
              }
              const double h = heads ? double(heads) : 1.0;
              std::printf("| %s | %d | %s | %d | %.2f | %.3f | %.1f | %.1f | %.1f%% |\n",
                          trace.name().c_str(), layer, std::string(name_of(pick)).c_str(), K, tau,
                          hits / h, rows_a / h, rows_b / h,
                          rows_a ? 100.0 * double(rows_b) / double(rows_a) : 0.0);
            }
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "prune_rate: %s\n", e.what());
    return 1;
  }
  return 0;
}
