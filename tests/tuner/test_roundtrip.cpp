// Every field of every config table survives the whole config path unchanged:
//   spec (YAML) -> grid point -> database (workload columns, launch text) -> decisions ->
//   emitted dispatch table (JSON) -> Dispatcher -> choice -> session options.
// The test walks the field tables themselves (kernels/fields.h), setting every field of the
// MAC settings and of the backend's engine config to a value other than its default: a field
// added to a table is covered without a line here. The spec's policy sections (measure, search,
// decide) are walked the same way, from their own tables (tuner/spec/spec.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "dispatcher/dispatch.h"
#include "dispatcher/session.h"
#include "kernels/cpu/instances.h"
#include "kernels/cpu/session.h"
#include "kernels/cuda/describe.h"
#include "kernels/cuda/engine_config.h"
#include "tests/db/fixtures.h"
#include "tuner/decide/emit.h"
#include "tuner/decide/store_io.h"
#include "tuner/spec/grid.h"

namespace mactune::tuner {
namespace {

using db::testing::TempDir;

// The instances of the test, described as the engines describe them: the CPU engine's generic
// path (every CPU runs it) and one instance of each CUDA family.
dispatch::Catalog catalog() {
  std::vector<InstanceDesc> all = {cpu::describe(true, cpu::Isa::generic, 128, DType::bf16),
                                   cpu::describe(false, cpu::Isa::generic, 128, DType::bf16)};
  all.push_back(cuda::describe(cuda::AttendConfig{128, 8, 64, 2, DType::bf16}));
  all.push_back(cuda::describe(cuda::FullConfig{128, 8, 64, 2, DType::bf16}));
  all.push_back(cuda::describe(cuda::MatchConfig{128, true, DType::bf16}));
  all.push_back(cuda::describe(cuda::MergeConfig{128}));
  return dispatch::Catalog(std::move(all));
}

// A value of `f` other than its default, inside its range and choices (an instance field:
// the catalog's instance of the family it names).
template <class S>
std::string probe(const Field<S>& f, const dispatch::Catalog& cat) {
  const Scalar d = f.default_value();
  switch (f.type) {
    case FieldType::integer: {
      const auto x = std::get<std::int64_t>(d);
      return std::to_string(f.bounds.holds(double(x + 1)) ? x + 1 : x - 1);
    }
    case FieldType::real: {
      const double x = std::get<double>(d);
      return format_real(f.bounds.holds(x / 2) && x != 0 ? x / 2 : x + 1);
    }
    case FieldType::boolean:
      return std::get<bool>(d) ? "false" : "true";
    case FieldType::choice:  // the last other choice ("generic" for the CPU ISA: it always runs)
      for (auto it = f.choices.rbegin(); it != f.choices.rend(); ++it)
        if (*it != f.text(d)) return *it;
      break;
    case FieldType::instance:
      for (const InstanceDesc& i : cat.instances())
        if (i.backend == mactune::Backend::cuda && name_of(i.family) == f.name) return i.name;
      break;
    case FieldType::text:
      break;
  }
  ADD_FAILURE() << "no probe value for field " << f.name;
  return f.text(d);
}

// "name: 'value'" lines for every field of S, indented by `indent`.
template <class S>
std::string yaml_fields(const dispatch::Catalog& cat, const std::string& indent) {
  std::ostringstream y;
  for (const Field<S>& f : fields_of<S>()) y << indent << f.name << ": '" << probe(f, cat) << "'\n";
  return y.str();
}

// Every field of `got` equals the probe, each named in a failure.
template <class S>
void expect_probes(const S& got, const dispatch::Catalog& cat, const std::string& where,
                   std::initializer_list<std::string_view> except = {}) {
  for (const Field<S>& f : fields_of<S>()) {
    if (std::find(except.begin(), except.end(), f.name) != except.end()) continue;
    EXPECT_EQ(f.text_of(got), f.text(f.parse(probe(f, cat)))) << where << ": " << f.name;
  }
}

template <class Engine>
void round_trip(Backend backend) {
  const std::string engine_section(name_of(backend));
  const dispatch::Catalog cat = catalog();
  // 1. The spec: every MAC setting and every engine field away from its default.
  const std::string spec_yaml =
      "name: rt\nworkload: {batch: 2, context: 8192, hit_rate: 1}\n"
      "kernels:\n  " +
      engine_section + ":\n" + yaml_fields<Engine>(cat, "    ") + "mac:\n" +
      yaml_fields<MacParams>(cat, "  ");
  const auto points = expand_grid(parse_spec(spec_yaml, "rt.yaml", backend));
  ASSERT_EQ(points.size(), 1u) << spec_yaml;
  const TunePoint& p = points[0];
  expect_probes(p.mac, cat, "grid point");
  if constexpr (std::is_same_v<Engine, cpu::EngineConfig>)
    expect_probes(p.cpu, cat, "grid point");
  else
    expect_probes(p.cuda, cat, "grid point");

  // 2. The database: the point's workload and launch text, MAC clearly faster than full.
  TempDir dir;
  db::Store store = db::Store::open(dir.file("rt.db"));
  DeviceFingerprint device = db::testing::test_device();
  device.backend = backend;
  const db::Id dev = store.upsert_device(device);
  const db::Id build = store.upsert_build(db::testing::test_build());
  const db::Id run = store.begin_run({.spec_text = spec_yaml, .device_id = dev, .build_id = build});
  // The instances the point runs (what the backend's instance_names() would give).
  const InstanceDesc* mac_desc =
      cat.find(backend == Backend::cpu ? cpu::instance_name(true, p.cpu.isa, 128, DType::bf16)
                                       : p.cuda.attend);
  const InstanceDesc* full_desc =
      cat.find(backend == Backend::cpu ? cpu::instance_name(false, p.cpu.isa, 128, DType::bf16)
                                       : p.cuda.full);
  ASSERT_TRUE(mac_desc && full_desc);
  const db::Id w = store.upsert_workload(to_db_workload(p));
  for (const InstanceDesc* i : {mac_desc, full_desc}) {
    db::Measurement m;
    m.point = {dev, build, store.upsert_instance(*i), p.launch_text(), w, "steady_clock", true};
    m.run_id = run;
    const double t = i == mac_desc ? 1e-3 : 4e-3;
    m.stats = {10, t, t * 0.99, t * 1.01, t * 0.98, t * 1.05, t, 0, 0.01};
    store.record_measurement(m);
  }
  const Selection sel{dev, build, "steady_clock", true};
  const LoadedPairs loaded = load_pairs(store, sel);
  ASSERT_EQ(loaded.pairs.size(), 1u);
  ASSERT_TRUE(loaded.pairs[0].mac_config.mac) << "database: the MAC side's settings";
  expect_probes(*loaded.pairs[0].mac_config.mac, cat, "database");
  EXPECT_EQ(loaded.pairs[0].mac_config.launch, p.launch()) << "database: launch parameters";
  EXPECT_EQ(loaded.pairs[0].full_config.launch, p.launch()) << "database: the full side's launch";

  // 3. Decisions, the emitted table as JSON, a Dispatcher reading it.
  Decided d = decide_and_store(store, sel, {});
  d.device = device;
  const std::string json = dispatch::to_json(make_table(d, "rt.db"));
  dispatch::LoadOptions lo;
  lo.device.backend = backend;
  lo.check_device = false;
  lo.catalog = &cat;
  std::string refusal;
  lo.warn = [&](std::string_view why) { refusal = std::string(why); };
  const auto disp = dispatch::Dispatcher::from_text(json, "rt.json", lo);
  ASSERT_TRUE(disp.table()) << refusal << "\n" << json;
  const dispatch::Choice c = disp.select(p.shape, p.context, 1.0);
  ASSERT_TRUE(c.use_mac()) << dispatch::describe(c);

  // 4. The session options the choice makes: every field as the spec wrote it. Tau is the
  // caller's: hits were forced while tuning, so the threshold was not measured
  // (tuner/decide/emit.h).
  SessionOptions<Engine> base;
  const auto opt = dispatch::session_options(c, cat, base);
  EXPECT_TRUE(opt.mac_enabled);
  expect_probes(opt.mac, cat, "session", {"tau"});
  EXPECT_EQ(opt.mac.tau, base.mac.tau) << "tau stays the caller's";
  expect_probes(opt.engine, cat, "session");
}

TEST(ConfigRoundTrip, EveryCpuFieldSurvivesSpecDatabaseTableDispatcherSession) {
  round_trip<cpu::EngineConfig>(Backend::cpu);
}

TEST(ConfigRoundTrip, EveryCudaFieldSurvivesSpecDatabaseTableDispatcherSession) {
  round_trip<cuda::EngineConfig>(Backend::cuda);
}

// A table naming a parameter neither the MAC settings nor the engine know is refused where
// it becomes session options (a CPU table for a CUDA session, a misspelt key).
TEST(ConfigRoundTrip, UnknownParamsAreRefused) {
  const dispatch::Catalog cat = catalog();
  dispatch::Choice c;
  c.full.instance = cat.instances()[1].name;
  c.full.params = {{"threads", std::int64_t{2}}};
  EXPECT_EQ(dispatch::session_options(c, cat, cpu::SessionOptions{}).engine.threads, 2);
  EXPECT_THROW(dispatch::session_options(c, cat, SessionOptions<cuda::EngineConfig>{}), InputError);
  c.full.params = {{"thread", std::int64_t{2}}};
  EXPECT_THROW(dispatch::session_options(c, cat, cpu::SessionOptions{}), InputError);
}

// Every spelling (name and aliases) of every row of S.
template <Described S>
std::vector<std::string> spellings() {
  std::vector<std::string> out;
  for (const Field<S>& f : fields_of<S>()) {
    out.emplace_back(f.name);
    for (std::string_view a : f.aliases) out.emplace_back(a);
  }
  return out;
}

// A dispatch table's params hold the MAC settings and the engine's launch parameters in one
// map, and session_options() sends a key to the MAC settings whenever MacParams knows it: an
// engine row spelt like a MAC row (or like one's alias) would never reach the engine. No
// spelling may be in both tables, for either engine.
TEST(ConfigRoundTrip, MacAndEngineRowsNeverShareASpelling) {
  const std::vector<std::string> mac = spellings<MacParams>();
  for (const auto& [engine, names] : {std::pair{"cpu", spellings<cpu::EngineConfig>()},
                                      std::pair{"cuda", spellings<cuda::EngineConfig>()}})
    for (const std::string& n : names)
      EXPECT_EQ(std::find(mac.begin(), mac.end(), n), mac.end())
          << engine << " EngineConfig row '" << n << "' is also a MacParams spelling";
}

// ---- The spec's policy sections (measure, search, decide): their tables' rows, walked.

// The struct a policy section reads into, and the section's name.
template <class S>
S& policy_of(Spec& spec);
template <>
MeasurePolicy& policy_of(Spec& spec) {
  return spec.measure;
}
template <>
Search& policy_of(Spec& spec) {
  return spec.search;
}
template <>
DecidePolicy& policy_of(Spec& spec) {
  return spec.decide;
}

// Every row away from its default: spec key -> struct -> "name=value" text -> struct again.
template <class S>
void policy_round_trip(const std::string& section) {
  const dispatch::Catalog cat = catalog();
  const std::string yaml = "name: rt\n" + section + ":\n" + yaml_fields<S>(cat, "  ");
  Spec spec = parse_spec(yaml, "rt.yaml", Backend::cuda);
  const S& got = policy_of<S>(spec);
  for (const Field<S>& f : fields_of<S>())
    EXPECT_NE(f.text_of(got), f.text(f.default_value())) << section << "." << f.name << " kept "
                                                         << "its default";
  expect_probes(got, cat, "spec " + section);
  const std::string text = fields_text(got);
  S back;
  parse_fields_text(back, text);
  expect_probes(back, cat, "text " + text);
  EXPECT_EQ(fields_text(back), text);
}

TEST(ConfigRoundTrip, EveryPolicyFieldSurvivesSpecStructText) {
  policy_round_trip<MeasurePolicy>("measure");
  policy_round_trip<Search>("search");
  policy_round_trip<DecidePolicy>("decide");
}

// The message of the InputError parsing `yaml` throws ("" if none).
std::string spec_error_of(const std::string& yaml) {
  try {
    parse_spec(yaml, "t.yaml", Backend::cpu);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// Every numeric row's range is enforced from the spec: a value just outside each finite bound
// is refused on its line, naming SECTION.KEY and the range; the bound itself (when closed) is
// read. An unknown key names every row.
template <class S>
void policy_ranges(const std::string& section) {
  std::string rows;
  for (const Field<S>& f : fields_of<S>()) {
    rows += std::string(rows.empty() ? "" : ", ") + std::string(f.name);
    if (f.type != FieldType::integer && f.type != FieldType::real) continue;
    const bool integer = f.type == FieldType::integer;
    const double step = integer ? 1 : 0.5;
    const FieldRange& b = f.bounds;
    std::vector<double> outside;
    if (std::isfinite(b.lo)) outside.push_back(b.lo_open ? b.lo : b.lo - step);
    if (std::isfinite(b.hi)) outside.push_back(b.hi_open ? b.hi : b.hi + step);
    EXPECT_FALSE(outside.empty()) << section << "." << f.name << " has no finite bound";
    const std::string key = section + "." + std::string(f.name);
    for (const double x : outside) {
      const std::string v = integer ? std::to_string(static_cast<std::int64_t>(x)) : format_real(x);
      const std::string e =
          spec_error_of("name: t\n" + section + ":\n  " + std::string(f.name) + ": " + v + "\n");
      EXPECT_EQ(e, "t.yaml:3: " + key + ": " + b.requirement(integer) + ", got " + v) << key;
    }
    for (const double x : {b.lo, b.hi}) {
      if (!std::isfinite(x) || (x == b.lo && b.lo_open) || (x == b.hi && b.hi_open)) continue;
      const std::string v = integer ? std::to_string(static_cast<std::int64_t>(x)) : format_real(x);
      std::string yaml = "name: t\n" + section + ":\n  " + std::string(f.name) + ": " + v + "\n";
      // The one check across rows: a bound of one side of [min_samples, max_samples] needs the
      // other beside it.
      if (f.name == "min_samples") yaml += "  max_samples: " + v + "\n";
      if (f.name == "max_samples") yaml += "  min_samples: " + v + "\n";
      EXPECT_EQ(spec_error_of(yaml), "") << key << " = " << v;
    }
  }
  const std::string e = spec_error_of("name: t\n" + section + ":\n  bogus: 1\n");
  EXPECT_EQ(e, "t.yaml:3: " + section + ".bogus: unknown key (expected one of: " + rows + ")");
}

TEST(ConfigRoundTrip, EveryPolicyRangeIsEnforcedFromTheSpec) {
  policy_ranges<MeasurePolicy>("measure");
  policy_ranges<Search>("search");
  policy_ranges<DecidePolicy>("decide");
}

// Which check failed, as the refusal says (FieldError): the spec words a range failure as the
// range and every other one in the field's own words.
FieldCheck failed_check(const Field<Search>& f, std::string_view text) {
  try {
    f.parse(text);
  } catch (const FieldError& e) {
    return e.failed;
  }
  ADD_FAILURE() << f.name << " read '" << text << "'";
  return FieldCheck::type;
}

TEST(ConfigRoundTrip, PolicyRefusalsSayWhichCheckFailed) {
  const Field<Search>& first = *find_field<Search>("first_samples");  // [1, 1000]
  EXPECT_EQ(failed_check(first, "many"), FieldCheck::type);
  EXPECT_EQ(failed_check(first, "2.5"), FieldCheck::type);
  EXPECT_EQ(failed_check(first, "0"), FieldCheck::range);
  EXPECT_EQ(failed_check(first, "1e16"), FieldCheck::range);  // past 9e15, outside the bounds
  EXPECT_EQ(failed_check(*find_field<Search>("strategy"), "bayes"), FieldCheck::choice);
  EXPECT_EQ(spec_error_of("name: t\nsearch:\n  first_samples: 1e16\n"),
            "t.yaml:3: search.first_samples: must be in [1, 1000], got 1e16");
  EXPECT_EQ(spec_error_of("name: t\nsearch:\n  first_samples: 2.5\n"),
            "t.yaml:3: search.first_samples: expected an integer, got '2.5'");
}

}  // namespace
}  // namespace mactune::tuner
