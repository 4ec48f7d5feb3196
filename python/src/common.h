// Shared pieces of the Python bindings: arrays seen without copies, arrays handed to Python
// without copies, and the Python face of each bound struct (attributes, keyword construction,
// repr, to_dict). A struct with a C++ field table (kernels/fields.h) gets its attributes from
// that table - the names of specs, tables and the CLI, range-checked on assignment; the others
// list their members here.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/filesystem.h>
#include <nanobind/stl/function.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/variant.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kernels/error.h"
#include "kernels/fields.h"

namespace mactune::py {

namespace nb = nanobind;

// ---- Arrays in: float32, C-contiguous, on the CPU, seen in place (numpy through the buffer
// protocol or DLPack, torch CPU tensors through DLPack). Anything else is an InputError naming
// the argument and what was expected: never a silent conversion copy.

using AnyArray = nb::ndarray<nb::ro>;           // read-only view of any dtype, any device
using AnyArrayMut = nb::ndarray<>;              // writable view of any dtype, any device
inline constexpr std::int64_t kAnyExtent = -1;  // a dimension the caller does not fix

std::string shape_text(const AnyArray& a);
std::string shape_text(std::initializer_list<std::int64_t> shape);

// Checks dtype float32, C order, the expected shape (kAnyExtent matches any extent) and the
// device (`device_type` as DLPack numbers it: nb::device::cpu::value or cuda::value).
void check_f32(const AnyArray& a, const char* what, std::initializer_list<std::int64_t> shape,
               const char* dims, int device_type = nb::device::cpu::value);

// An array argument taken as a Python object, so that anything else (a list, a tuple, None)
// is one line naming the argument, not nanobind's multi-line overload listing. A list is not
// converted: mactune never copies an input silently (numpy.asarray(x, numpy.float32) does).
AnyArray array_arg(nb::handle h, const char* what);

// InputError naming the argument and the [i, j, k] index of the first NaN or inf of `a`
// (a query, key or value of a step: a NaN would come back as zeros or NaN outputs).
void check_finite(const AnyArray& a, const char* what);

inline std::span<const float> f32_span(const AnyArray& a) {
  return {static_cast<const float*>(a.data()), a.size()};
}
inline std::span<float> f32_span(const AnyArrayMut& a) {
  return {static_cast<float*>(a.data()), a.size()};
}
inline AnyArray read_only(const AnyArrayMut& a) {
  return AnyArray(a);
}

// ---- Paths in: str, bytes or os.PathLike (os.fsdecode decodes bytes as the file system
// does); anything else is Python's own one-line TypeError.
inline std::string fspath(nb::handle p) {
  return nb::cast<std::string>(nb::module_::import_("os").attr("fsdecode")(p));
}

// ---- Arrays out: a fresh numpy array owning a heap buffer (no copy on the way to Python).

template <class T>
struct Owned {
  T* data = nullptr;
  nb::capsule owner;
};

template <class T>
Owned<T> allocate(std::size_t count) {
  T* p = new T[count > 0 ? count : 1]();
  return {p, nb::capsule(p, [](void* q) noexcept { delete[] static_cast<T*>(q); })};
}

template <class T>
nb::ndarray<nb::numpy, T> numpy_array(Owned<T> buf, std::initializer_list<std::size_t> shape) {
  return nb::ndarray<nb::numpy, T>(buf.data, shape, buf.owner);
}

// A numpy copy of a vector (small read-outs: ring entries, decisions).
template <class T>
nb::ndarray<nb::numpy, T> numpy_copy(const T* src, std::initializer_list<std::size_t> shape) {
  std::size_t n = 1;
  for (std::size_t s : shape) n *= s;
  Owned<T> buf = allocate<T>(n);
  std::copy(src, src + n, buf.data);
  return numpy_array(std::move(buf), shape);
}

// ---- Field tables: one line per member, giving attribute access, keyword construction
// (`MacParams(tau=0.3, r=64)`; an unknown keyword is an InputError listing the fields),
// repr and to_dict.

// A Python value as a value of field `f` (int, float, bool or str as the field's type says),
// before f.check(): InputError naming the field and what it got otherwise.
template <class S>
Scalar python_scalar(const Field<S>& f, nb::handle value) {
  // A numpy scalar (numpy.int64(512), numpy.float32(0.5), numpy.bool_) or 0-d array counts
  // as the Python value it holds: numpy.arange and friends hand out such values.
  nb::object held = nb::borrow(value);
  if (!PyLong_Check(value.ptr()) && !PyFloat_Check(value.ptr()) && !PyUnicode_Check(value.ptr()) &&
      nb::hasattr(value, "dtype") && nb::hasattr(value, "item") && nb::hasattr(value, "ndim") &&
      nb::cast<int>(value.attr("ndim")) == 0)
    held = value.attr("item")();
  const nb::handle v = held;
  const auto refuse = [&](const char* expected) {
    input_error(f.name, ": expected ", expected, ", got ",
                nb::cast<std::string>(nb::str(v.type().attr("__name__"))), " ",
                nb::cast<std::string>(nb::repr(v)));
  };
  const bool is_bool = PyBool_Check(v.ptr()), is_int = PyLong_Check(v.ptr()) && !is_bool;
  switch (f.type) {
    case FieldType::integer: {
      if (!is_int) refuse("an integer");
      std::int64_t x = 0;
      if (!nb::try_cast(v, x))
        input_error(f.name, ": ", nb::cast<std::string>(nb::repr(v)), " is out of range");
      return x;
    }
    case FieldType::real:
      if (!is_int && !PyFloat_Check(v.ptr())) refuse("a number");
      return nb::cast<double>(v);
    case FieldType::boolean:
      if (!is_bool) refuse("True or False");
      return nb::cast<bool>(v);
    default:
      if (!nb::isinstance<nb::str>(v)) refuse("a string");
      return nb::cast<std::string>(v);
  }
}

// python_scalar() checked by the field (range, choices): InputError "NAME: why" otherwise.
template <class S>
Scalar checked_scalar(const Field<S>& f, nb::handle v) {
  const Scalar s = python_scalar(f, v);  // its errors name the field already
  try {
    return f.check(s);
  } catch (const InputError& e) {
    input_error(f.name, ": ", e.what());
  }
}

// Warns (DeprecationWarning) that `old_name` of `type_name` is now `new_name`.
inline void warn_renamed(const char* type_name, const std::string& old_name,
                         const std::string& new_name) {
  const std::string msg = std::string(type_name) + "." + old_name + " is deprecated: use " +
                          new_name + " (the name specs, tables and the CLI use)";
  if (PyErr_WarnEx(PyExc_DeprecationWarning, msg.c_str(), 1) != 0) throw nb::python_error();
}

template <class T>
class Fields {
 public:
  explicit Fields(nb::class_<T>& cls, const char* type_name) : cls_(cls), type_name_(type_name) {}

  // Every row of the struct's C++ field table (kernels/fields.h) but `skip`, in table order:
  // an attribute named as the row (the spelling of specs, tables and the CLI), its help as the
  // docstring, its value an int, float, bool or str, checked (type, range, choices) on every
  // assignment and keyword.
  Fields& table(std::initializer_list<std::string_view> skip = {}) requires Described<T> {
    for (const Field<T>& f : fields_of<T>()) {
      if (std::find(skip.begin(), skip.end(), f.name) != skip.end()) continue;
      const std::string name(f.name);
      const auto set = [f, type_name = type_name_](T& t, nb::handle v) {
        try {
          f.set(t, checked_scalar(f, v));
        } catch (const InputError& e) {
          input_error(type_name, ".", e.what());  // "MacParams.K: value 0 is out of range ..."
        }
      };
      const auto get = [f](const T& t) { return nb::cast(f.get(t)); };
      // f.name views a string literal (the table's row), so its data() outlives the class.
      cls_.def_prop_rw(
          f.name.data(), get, [set](T& t, nb::handle v) { set(t, v); },
          kept(std::string(f.help) + describe_values(f)));
      entries_->push_back({name, set, get});
      for (std::string_view old_name : f.aliases)  // a row's earlier spellings warn
        deprecated_alias(old_name.data(), f.name.data());
    }
    // The rows themselves, for code that walks them (tests/python/test_fields.py does).
    nb::list rows;
    for (const Field<T>& f : fields_of<T>()) {
      nb::dict row;
      row["name"] = std::string(f.name);
      row["member"] = std::string(f.member);
      row["type"] = std::string(name_of(f.type));
      row["help"] = std::string(f.help);
      row["default"] = nb::cast(f.default_value());
      row["python"] = std::find(skip.begin(), skip.end(), f.name) == skip.end();
      nb::list aliases;  // earlier spellings, still read (flags of mactune.macflags too)
      for (std::string_view a : f.aliases) aliases.append(std::string(a));
      row["aliases"] = nb::tuple(aliases);
      if (f.type == FieldType::integer || f.type == FieldType::real) {
        row["lo"] = f.bounds.lo;
        row["hi"] = f.bounds.hi;
        row["lo_open"] = f.bounds.lo_open;
        row["hi_open"] = f.bounds.hi_open;
      }
      if (f.type == FieldType::choice) row["choices"] = nb::cast(f.choices);
      rows.append(row);
    }
    cls_.attr("FIELDS") = nb::tuple(rows);
    return *this;
  }
  // `old_name`, the Python name of a field before the names followed the field tables: still
  // an attribute and a keyword, with a DeprecationWarning naming the new one. Kept one release.
  Fields& deprecated_alias(const char* old_name, const char* new_name) {
    const Entry* target = find(*entries_, new_name);
    if (target == nullptr) input_error(type_name_, ": no field '", new_name, "' to alias");
    const Entry e = *target;
    const std::string type = type_name_, old_s = old_name, new_s = new_name;
    cls_.def_prop_rw(
        old_name,
        [e, type, old_s, new_s](const T& t) {
          warn_renamed(type.c_str(), old_s, new_s);
          return e.get(t);
        },
        [e, type, old_s, new_s](T& t, nb::handle v) {
          warn_renamed(type.c_str(), old_s, new_s);
          e.set(t, v);
        },
        kept("Deprecated: " + new_s + "."));
    aliases_->push_back({old_s, new_s});
    return *this;
  }

  // A plain member (number, bool, string or another bound struct).
  template <class M>
  Fields& add(const char* name, M T::*member, const char* doc) {
    cls_.def_rw(name, member, doc);
    entries_->push_back({name, [member, name](T& t, nb::handle v) { t.*member = cast<M>(v, name); },
                         [member](const T& t) { return nb::cast(t.*member); }});
    return *this;
  }
  // A member shown to Python as text (enums: "bf16", "nearest"), through the project's own
  // name/parse functions, so the spellings are those of specs, tables and the CLI.
  Fields& text(const char* name, std::function<std::string(const T&)> get,
               std::function<void(T&, std::string_view)> set, const char* doc) {
    cls_.def_prop_rw(
        name, [get](const T& t) { return get(t); },
        [set](T& t, const std::string& s) { set(t, s); }, doc);
    entries_->push_back({name,
                         [set, name](T& t, nb::handle v) { set(t, cast<std::string>(v, name)); },
                         [get](const T& t) { return nb::cast(get(t)); }});
    return *this;
  }
  // __init__(**kwargs), __repr__, to_dict(), __eq__ over the fields.
  void finish() {
    auto entries = entries_;
    auto aliases = aliases_;
    const char* type_name = type_name_;
    cls_.def(
        "__init__",
        [entries, aliases, type_name](T* self, const nb::kwargs& kw) {
          T value{};
          for (auto [key, v] : kw) {
            std::string k = nb::cast<std::string>(key);
            for (const auto& [old_name, new_name] : *aliases)
              if (k == old_name) {
                warn_renamed(type_name, old_name, new_name);
                k = new_name;
              }
            const Entry* e = find(*entries, k);
            if (e == nullptr)
              input_error(type_name, ": unknown field '", k, "' (fields: ", names(*entries), ")");
            e->set(value, v);
          }
          new (self) T(std::move(value));
        },
        (std::string("Keyword fields: ") + names(*entries) + ".").c_str());
    cls_.def("__repr__", [entries, type_name](const T& t) {
      std::string out = std::string(type_name) + "(";
      for (std::size_t i = 0; i < entries->size(); ++i) {
        if (i) out += ", ";
        out += (*entries)[i].name;
        out += "=";
        out += nb::cast<std::string>(nb::repr((*entries)[i].get(t)));
      }
      return out + ")";
    });
    cls_.def(
        "to_dict",
        [entries](const T& t) {
          nb::dict d;
          for (const Entry& e : *entries) {
            nb::object v = e.get(t);
            if (nb::hasattr(v, "to_dict")) v = v.attr("to_dict")();
            d[e.name.c_str()] = v;
          }
          return d;
        },
        "The fields as a dict (nested structs as dicts).");
    cls_.def("__eq__", [entries](const T& a, nb::handle b) {
      if (!nb::isinstance<T>(b)) return false;
      const T& bb = nb::cast<const T&>(b);
      for (const Entry& e : *entries)
        if (!e.get(a).equal(e.get(bb))) return false;
      return true;
    });
  }

 private:
  struct Entry {
    std::string name;
    std::function<void(T&, nb::handle)> set;
    std::function<nb::object(const T&)> get;
  };

  template <class M>
  static M cast(nb::handle v, const char* name) {
    try {
      // A bound struct also takes the dict its to_dict() gives: T(**to_dict()) == T.
      if constexpr (std::is_class_v<M> && !std::is_same_v<M, std::string>)
        if (nb::isinstance<nb::dict>(v) && nb::type<M>().is_valid())
          return nb::cast<M>(nb::type<M>()(**nb::borrow<nb::dict>(v)));
      return nb::cast<M>(v);
    } catch (const nb::cast_error&) {
      input_error("field '", name, "': cannot take ",
                  nb::cast<std::string>(nb::str(v.type().attr("__name__"))), " ",
                  nb::cast<std::string>(nb::repr(v)));
    }
  }
  static const Entry* find(const std::vector<Entry>& es, std::string_view k) {
    for (const Entry& e : es)
      if (k == e.name) return &e;
    return nullptr;
  }
  static std::string names(const std::vector<Entry>& es) {
    std::string out;
    for (const Entry& e : es) out += (out.empty() ? "" : ", ") + std::string(e.name);
    return out;
  }

  // A docstring that lives as long as the module.
  static const char* kept(std::string text) {
    static std::deque<std::string> texts;
    return texts.emplace_back(std::move(text)).c_str();
  }
  // "; must be in [1, 64]", "; one of a or b": the values a field takes, for its docstring.
  static std::string describe_values(const Field<T>& f) {
    if (f.type == FieldType::integer || f.type == FieldType::real)
      return std::string("; ") + f.bounds.requirement();
    if (f.type == FieldType::choice) return "; one of " + f.choice_list();
    if (f.type == FieldType::instance) return "; '' = auto";
    return "";
  }

  nb::class_<T>& cls_;
  const char* type_name_;
  std::shared_ptr<std::vector<Entry>> entries_ = std::make_shared<std::vector<Entry>>();
  std::shared_ptr<std::vector<std::pair<std::string, std::string>>> aliases_ =
      std::make_shared<std::vector<std::pair<std::string, std::string>>>();
};

// Registration functions, one per file.
void bind_types(nb::module_& m);
void bind_dispatch(nb::module_& m);
void bind_cpu(nb::module_& m);
void bind_cuda(nb::module_& m);
void bind_replay(nb::module_& m);
void bind_schedule(nb::module_& m);
void bind_testing(nb::module_& m);

}  // namespace mactune::py
