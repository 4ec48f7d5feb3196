// Command-line flags from field tables (kernels/fields.h): one `--name` per field ('_' spelt
// '-'), its help and default from the table, its value read and checked by the field, so a
// field added to a table is a flag of every command that takes its struct. A flag that would
// clash with one the command already has is spelt `--<prefix>-name` (CUDA's `full` instance is
// `--cuda-full` beside `mactune profile --full`).
#pragma once

#include <CLI/CLI.hpp>

#include <algorithm>
#include <functional>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "kernels/error.h"
#include "kernels/fields.h"

namespace mactune::cli {

class FieldFlags {
 public:
  // Adds a flag for every field of S but `skip`, writing into `target` (which must outlive the
  // command).
  template <Described S>
  void add(CLI::App& cmd, S& target, std::string_view prefix, std::string_view group,
           std::initializer_list<std::string_view> skip = {}) {
    for (const Field<S>& f : fields_of<S>()) {
      if (std::find(skip.begin(), skip.end(), f.name) != skip.end()) continue;
      std::string flag = "--" + dashed(f.name);
      if (cmd.get_option_no_throw(flag) != nullptr)
        flag = "--" + std::string(prefix) + "-" + dashed(f.name);
      add_field(cmd, target, f, flag, group);
    }
  }

  // One flag, spelt `flag`, for the field `name` of S (`mactune tune --search` is Search's
  // `strategy` row); given(group) or option(flag)->count() tells whether it was given. The
  // option is returned for a command whose default is not the target's (the spec's).
  template <Described S>
  CLI::Option* add_one(CLI::App& cmd, S& target, std::string_view name, const std::string& flag,
                       std::string_view group) {
    const Field<S>* f = find_field<S>(name);
    MACTUNE_CHECK(f != nullptr, "no field '", name, "' in the table");
    return add_field(cmd, target, *f, flag, group);
  }

  // `--name V1,V2,...` for the field `name` of S: the values a command sweeps, each read and
  // checked by the field (type, range, choices), into `values` (its defaults shown in the
  // help). `also` adds other spellings of the flag ("--taus").
  template <Described S, class T>
  void add_list(CLI::App& cmd, std::string_view name, std::vector<T>& values,
                std::string_view group, std::string_view help_suffix = " (a list sweeps)",
                std::string_view also = "") {
    const Field<S>* f = find_field<S>(name);
    MACTUNE_CHECK(f != nullptr, "no field '", name, "' in the table");
    const std::string flag = "--" + dashed(f->name);
    std::string shown;
    for (const T& v : values) shown += (shown.empty() ? "" : ",") + f->text(detail::to_scalar(v));
    auto set = [&values, f, flag](const std::vector<std::string>& texts) {
      values.clear();
      for (const std::string& text : texts) {
        try {
          values.push_back(detail::from_scalar<T>(f->parse(text)));
        } catch (const InputError& e) {
          input_error(flag, ": ", e.what());
        }
      }
    };
    CLI::Option* o = cmd.add_option_function<std::vector<std::string>>(
                            also.empty() ? flag : std::string(also) + "," + flag, set,
                            std::string(f->help) + std::string(help_suffix))
                         ->delimiter(',')
                         ->default_str(shown)
                         ->type_name(type_name(*f));
    o->group(std::string(group));
  }

  // The flags of `group` with their current values, as a command line would give them.
  std::vector<std::string> args(std::string_view group) const {
    std::vector<std::string> out;
    for (const Flag& f : flags_) {
      if (f.group != group) continue;
      const std::string v = f.value();
      if (f.boolean) {
        if (v == "true") out.push_back(f.flag);
      } else {
        out.insert(out.end(), {f.flag, v});
      }
    }
    return out;
  }
  // Whether any flag of `group` was given on the command line.
  bool given(std::string_view group) const {
    for (const Flag& f : flags_)
      if (f.group == group && f.option->count() > 0) return true;
    return false;
  }
  const CLI::Option* option(std::string_view flag) const {
    for (const Flag& f : flags_)
      if (f.flag == flag) return f.option;
    return nullptr;
  }

 private:
  // The flag of one field: its help, default and type from the row, its value read and checked
  // by the row into `target`.
  template <Described S>
  CLI::Option* add_field(CLI::App& cmd, S& target, const Field<S>& f, const std::string& flag,
                         std::string_view group) {
    auto set = [&target, &f, flag](const std::string& text) {
      try {
        f.set(target, f.parse(text));
      } catch (const InputError& e) {
        input_error(flag, ": ", e.what());
      }
    };
    // A row's earlier spellings (aliases) are other names of the same flag, where free.
    std::string names = flag;
    for (std::string_view old_name : f.aliases)
      if (cmd.get_option_no_throw("--" + dashed(old_name)) == nullptr)
        names += ",--" + dashed(old_name);
    CLI::Option* o = f.type == FieldType::boolean
                         ? cmd.add_flag_function(
                               names, [set](std::int64_t n) { set(n > 0 ? "true" : "false"); },
                               std::string(f.help))
                         : cmd.add_option_function<std::string>(names, set, std::string(f.help))
                               ->default_str(f.text_of(target))
                               ->type_name(type_name(f));
    o->group(std::string(group));
    flags_.push_back({std::string(group), flag, f.type == FieldType::boolean,
                      [&target, &f] { return f.text_of(target); }, o});
    return o;
  }

  struct Flag {
    std::string group, flag;
    bool boolean = false;
    std::function<std::string()> value;
    CLI::Option* option = nullptr;
  };
  template <class S>
  static std::string type_name(const Field<S>& f) {
    switch (f.type) {
      case FieldType::integer:
        return "INT";
      case FieldType::real:
        return "FLOAT";
      case FieldType::choice: {
        std::string s = "{";
        for (const std::string& c : f.choices) s += (s.size() > 1 ? "," : "") + c;
        return s + "}";
      }
      case FieldType::instance:
        return "NAME|auto";
      default:
        return "TEXT";
    }
  }
  static std::string dashed(std::string_view name) {
    std::string s(name);
    for (char& c : s)
      if (c == '_') c = '-';
    return s;
  }
  std::vector<Flag> flags_;
};

}  // namespace mactune::cli
