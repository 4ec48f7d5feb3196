// Launch parameters: the fields of a backend's engine table (kernels/cpu/engine_config.h,
// kernels/cuda/engine_config.h) that travel by name (FieldRole::param), typed and in table
// order. What the tuner sweeps under `kernels.<backend>`, what a measurement's `params` text
// spells ("threads=1,chunk_tokens=256,block_rows=16,match_mode=scan") and what the database's
// `launches` table holds one column per field (db/settings.cpp). An instance field left to the
// engine travels as "auto", as every text form spells it.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kernels/cpu/engine_config.h"
#include "kernels/cuda/engine_config.h"
#include "kernels/error.h"
#include "kernels/fields.h"
#include "kernels/instance.h"

namespace mactune {

using LaunchParams = std::vector<std::pair<std::string, Scalar>>;

template <class Engine>
LaunchParams launch_params_of(const Engine& e) {
  LaunchParams out;
  for (const Field<Engine>& f : fields_of<Engine>()) {
    if (f.role != FieldRole::param) continue;
    const Scalar v = f.get(e);
    out.emplace_back(std::string(f.name), f.type == FieldType::instance ? Scalar(f.text(v)) : v);
  }
  return out;
}

// "threads=0,chunk_tokens=256,block_rows=16": the text the database keys points by.
inline std::string launch_params_text(const LaunchParams& launch) {
  std::string s;
  for (const auto& [k, v] : launch) {
    if (!s.empty()) s += ',';
    s.append(k).append("=").append(scalar_text(v));
  }
  return s;
}

// Calls f(engine defaults) with the backend's engine config type.
template <class F>
decltype(auto) with_engine(Backend backend, F&& f) {
  if (backend == Backend::cuda) return f(cuda::EngineConfig{});
  return f(cpu::EngineConfig{});
}

// Reads launch_params_text() (or any "name=value,..." of the backend's param fields, aliases
// included; fields it omits keep their defaults) back, canonical: every param field, in order.
inline LaunchParams parse_launch_params(Backend backend, std::string_view text) {
  return with_engine(backend, [&](auto e) {
    parse_fields_text(e, text);
    return launch_params_of(e);
  });
}

// The engine config a launch describes (fields it does not list keep their defaults; an
// instance field's "auto" is the engine's pick). InputError on a name or value the table refuses.
template <class Engine>
Engine engine_of(const LaunchParams& launch) {
  Engine e;
  for (const auto& [name, v] : launch) {
    const Field<Engine>* f = find_field<Engine>(name);
    if (!f) input_error("unknown launch parameter '", name, "'");
    const bool automatic = f->type == FieldType::instance && v == Scalar(std::string("auto"));
    try {
      f->set(e, f->check(automatic ? Scalar(std::string()) : v));
    } catch (const InputError& err) {
      input_error(name, ": ", err.what());
    }
  }
  return e;
}

// The param fields of a backend's engine table: name, type and default, in table order.
struct LaunchField {
  std::string name;
  FieldType type = FieldType::integer;
  Scalar default_value;
};
inline std::vector<LaunchField> launch_fields(Backend backend) {
  return with_engine(backend, [](auto e) {
    using Engine = decltype(e);
    std::vector<LaunchField> out;
    for (const Field<Engine>& f : fields_of<Engine>())
      if (f.role == FieldRole::param) {
        const Scalar v = f.get(e);
        out.push_back(
            {std::string(f.name), f.type, f.type == FieldType::instance ? Scalar(f.text(v)) : v});
      }
    return out;
  });
}

}  // namespace mactune
