// Shared pieces of the Python bindings: arrays seen without copies, arrays handed to Python
// without copies, and a small field table per bound struct (keyword construction, repr,
// to_dict), so that each C++ struct is described once here. When the C++ side grows its own
// field tables (one description per config struct), these tables are derived from them.
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
#include <functional>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kernels/error.h"

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
// (`MacParams(tau=0.3, band=64)`; an unknown keyword is an InputError listing the fields),
// repr and to_dict.

template <class T>
class Fields {
 public:
  explicit Fields(nb::class_<T>& cls) : cls_(cls) {}

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
  void finish(const char* type_name) {
    auto entries = entries_;
    cls_.def(
        "__init__",
        [entries, type_name](T* self, const nb::kwargs& kw) {
          T value{};
          for (auto [key, v] : kw) {
            const std::string k = nb::cast<std::string>(key);
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
            d[e.name] = v;
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
    const char* name;
    std::function<void(T&, nb::handle)> set;
    std::function<nb::object(const T&)> get;
  };

  template <class M>
  static M cast(nb::handle v, const char* name) {
    try {
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

  nb::class_<T>& cls_;
  std::shared_ptr<std::vector<Entry>> entries_ = std::make_shared<std::vector<Entry>>();
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
