// From a dispatch choice to the options of the session that runs it: the chosen instances,
// launch parameters and MAC settings laid over the caller's options, each through its field
// table (kernels/fields.h), so whatever the tuner measured reaches the engine unchanged.
//
//   const dispatch::Choice c = dispatcher.select(problem, kv_len, expected_hit_rate);
//   cpu::SessionOptions opt = dispatch::session_options(c, dispatcher.catalog(), base);
//   cpu::Session session(opt);
//
// Header-only: it knows the session contract (kernels/session.h), not the engines.
#pragma once

#include <string>

#include "dispatcher/dispatch.h"
#include "kernels/error.h"
#include "kernels/fields.h"
#include "kernels/session.h"

namespace mactune::dispatch {

// `base` with what `choice` says: mac_enabled, the MAC settings (K, r, tau when the table has
// it, and every other MAC setting in params), the engine's launch parameters, and the engine
// settings that select the chosen instances (their descriptions' `selects`: the CPU ISA, the
// CUDA attend and full instances). InputError when a param is neither a MAC setting nor a
// field of `Engine` (a table of another backend), or an instance is not in `catalog`.
template <class Engine>
SessionOptions<Engine> session_options(const Choice& choice, const Catalog& catalog,
                                       SessionOptions<Engine> base) {
  base.mac_enabled = choice.use_mac();
  if (choice.mac) base.mac = mac_settings(*choice.mac, base.mac);
  Params engine;  // every param that is not a MAC setting is the engine's
  for (const auto& [key, value] : choice.mac ? choice.mac->params : choice.full.params)
    if (!find_field<MacParams>(key)) engine.emplace(key, value);
  for (const std::string& name :
       {choice.full.instance, choice.mac ? choice.mac->instance : std::string()}) {
    if (name.empty()) continue;
    const InstanceDesc* d = catalog.find(name);
    MACTUNE_REQUIRE(d != nullptr, "dispatch choice: instance '", name, "' is not in the catalog");
    for (const auto& [key, value] : d->selects) engine[key] = value;
  }
  const std::vector<std::string> unknown = assign_params(base.engine, engine);
  MACTUNE_REQUIRE(unknown.empty(), "dispatch choice: parameter '",
                  unknown.empty() ? "" : unknown.front(),
                  "' is neither a MAC setting nor a parameter of this engine");
  return base;
}

}  // namespace mactune::dispatch
