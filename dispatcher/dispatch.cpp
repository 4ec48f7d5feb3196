// Validation against the running device and the compiled instances, and select().
#include "dispatcher/dispatch.h"

#include <iostream>
#include <sstream>

#include "kernels/error.h"

namespace mactune::dispatch {
namespace {

std::string check_instance(const Catalog& catalog, const std::string& name, const ShapeKey& shape,
                           Backend backend, bool full, const std::string& where) {
  const InstanceDesc* info = catalog.find(name);
  if (!info)
    return where + " '" + name + "' is not an instance of this build" +
           (catalog.empty() ? " (the catalog is empty: this build has no kernel registry)" : "");
  if (info->backend != backend)
    return where + " '" + name + "' runs on " + std::string(name_of(info->backend)) +
           ", the table is for " + std::string(name_of(backend));
  if (full != (info->family == Family::full))
    return where + " '" + name + "' is a " + std::string(name_of(info->family)) +
           " instance, expected " + (full ? "a full-attention one" : "a MAC one");
  if (!catalog.fits(*info, shape.problem())) {
    std::ostringstream e;
    e << where << " '" << name << "' does not run head_dim " << shape.head_dim << ", heads "
      << shape.q_heads << '/' << shape.kv_heads << ", " << dtype_name(shape.kv_dtype);
    return e.str();
  }
  return "";
}

// The choice of table entry `i` at this hit rate.
Choice entry_choice(const DispatchTable& t, int i, double hit_rate) {
  const Entry& e = t.entries[static_cast<std::size_t>(i)];
  Choice c;
  c.source = ChoiceSource::table;
  c.entry = i;
  c.full = e.full;
  c.min_hit_rate = e.min_hit_rate;
  // NaN never compares >=: an unknown hit rate means full attention.
  if (e.mac && e.min_hit_rate && hit_rate >= *e.min_hit_rate) c.mac = e.mac;
  return c;
}

bool holds(const Entry& e, const Problem& p, std::int64_t context) {
  return e.batch.contains(p.batch) && e.context.contains(context);
}

std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

}  // namespace

std::string describe(const Choice& c) {
  std::ostringstream out;
  if (c.instance().empty()) {
    out << "none (no full-attention instance of this build fits the shape)";
    return out.str();
  }
  out << (c.use_mac() ? "mac " : "full ") << c.instance();
  if (c.mac) {
    out << " K=" << c.mac->ring_capacity << " r=" << c.mac->band;
    if (c.mac->tau) out << " tau=" << *c.mac->tau;
  }
  const Params& params = c.mac ? c.mac->params : c.full.params;
  for (const auto& [key, value] : params) {
    out << ' ' << key << '=';
    std::visit([&out](const auto& x) { out << x; }, value);
  }
  if (c.source == ChoiceSource::table) {
    out << " (table entry " << c.entry << ", break-even ";
    if (c.min_hit_rate)
      out << *c.min_hit_rate << ')';
    else
      out << "none)";
  } else {
    out << " (fallback)";
  }
  return out.str();
}

std::string validate_table(const DispatchTable& t, const LoadOptions& options) {
  if (std::string why = check_structure(t); !why.empty()) return why;
  if (options.check_device) {
    const DeviceFingerprint& d = options.device;
    if (t.device.backend != d.backend)
      return "made for backend " + std::string(name_of(t.device.backend)) + ", this device is " +
             std::string(name_of(d.backend));
    if (t.device.fingerprint != d.digest())
      return "made on another device: '" + t.device.name + "' (fingerprint " +
             t.device.fingerprint + "), this is '" + d.name + "' (fingerprint " + d.digest() + ")";
  }
  const Catalog& catalog = options.catalog ? *options.catalog : default_catalog();
  for (std::size_t i = 0; i < t.entries.size(); ++i) {
    const Entry& e = t.entries[i];
    const std::string at = "entries[" + std::to_string(i) + "]";
    std::string why =
        check_instance(catalog, e.full.instance, e.shape, t.device.backend, true, at + ".full");
    if (why.empty() && e.mac)
      why = check_instance(catalog, e.mac->instance, e.shape, t.device.backend, false, at + ".mac");
    if (!why.empty()) return why;
  }
  return "";
}

Choice fallback_choice(const Catalog& catalog, Backend backend, const Problem& p) {
  Choice c;
  if (const InstanceDesc* info = catalog.first_fit(backend, Family::full, p))
    c.full.instance = info->name;
  return c;
}

Choice select(const DispatchTable* t, const Catalog& catalog, Backend backend, const Problem& p,
              std::int64_t context, double hit_rate) {
  if (t) {
    const ShapeKey key = ShapeKey::of(p);
    for (std::size_t i = 0; i < t->entries.size(); ++i)
      if (t->entries[i].shape == key && holds(t->entries[i], p, context))
        return entry_choice(*t, static_cast<int>(i), hit_rate);
  }
  return fallback_choice(catalog, backend, p);
}

// ---- Dispatcher.

Dispatcher::Dispatcher(LoadOptions options) : options_(std::move(options)) {}

const Catalog& Dispatcher::catalog() const {
  return options_.catalog ? *options_.catalog : default_catalog();
}

void Dispatcher::refuse(std::string_view origin, const std::string& why) {
  refusal_ = one_line("dispatch table '" + std::string(origin) + "' refused: " + why +
                      "; using the built-in fallback (full attention)");
  if (options_.warn)
    options_.warn(refusal_);
  else
    std::cerr << "mactune: warning: " << refusal_ << '\n';
}

void Dispatcher::adopt(DispatchTable table, std::string_view origin) {
  if (std::string why = validate_table(table, options_); !why.empty()) return refuse(origin, why);
  table_ = std::move(table);
  for (std::size_t i = 0; i < table_->entries.size(); ++i)
    by_shape_[table_->entries[i].shape].push_back(static_cast<int>(i));
}

Dispatcher Dispatcher::from_table(DispatchTable table, std::string_view origin,
                                  LoadOptions options) {
  Dispatcher d(std::move(options));
  d.adopt(std::move(table), origin);
  return d;
}

Dispatcher Dispatcher::from_text(std::string_view json_text, std::string_view origin,
                                 LoadOptions options) {
  Dispatcher d(std::move(options));
  DispatchTable table;
  try {
    table = parse_table(json_text, origin);
  } catch (const Error& e) {
    // parse_table's message names the origin already: "dispatch table 'x': $.path: what".
    std::string why = e.what();
    const std::string prefix = "dispatch table '" + std::string(origin) + "': ";
    if (why.rfind(prefix, 0) == 0) why.erase(0, prefix.size());
    d.refuse(origin, why);
    return d;
  }
  d.adopt(std::move(table), origin);
  return d;
}

Dispatcher Dispatcher::load(const std::filesystem::path& path, LoadOptions options) {
  DispatchTable table;
  try {
    table = read_table(path);
  } catch (const Error& e) {
    Dispatcher d(std::move(options));
    std::string why = e.what();
    const std::string prefix = "dispatch table '" + path.string() + "': ";
    if (why.rfind(prefix, 0) == 0) why.erase(0, prefix.size());
    d.refuse(path.string(), why);
    return d;
  }
  return from_table(std::move(table), path.string(), std::move(options));
}

Choice Dispatcher::select(const Problem& p, std::int64_t context, double hit_rate) const {
  if (table_) {
    if (const auto it = by_shape_.find(ShapeKey::of(p)); it != by_shape_.end())
      for (int i : it->second)
        if (holds(table_->entries[static_cast<std::size_t>(i)], p, context))
          return entry_choice(*table_, i, hit_rate);
  }
  return fallback_choice(catalog(), options_.device.backend, p);
}

}  // namespace mactune::dispatch
