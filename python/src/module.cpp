// The extension module mactune._mactune: the C++ libraries as Python types, with every error
// a Python exception carrying the library's one-line message:
//   mactune.InputError (a ValueError too): bad input from the caller — a shape, a file, a
//                      setting; the message names the value and where it came from;
//   mactune.Error (a RuntimeError): a failure inside mactune (a broken invariant, CUDA).
#include <Python.h>

#include "mactune/build_info.h"
#include "python/src/common.h"
#include "python/src/session_binding.h"

namespace mactune::py {
namespace {

PyObject* g_error = nullptr;
PyObject* g_input_error = nullptr;

void translate(const std::exception_ptr& p, void*) {
  try {
    std::rethrow_exception(p);
  } catch (const InputError& e) {
    PyErr_SetString(g_input_error, e.what());
  } catch (const Error& e) {
    PyErr_SetString(g_error, e.what());
  }
}

}  // namespace
}  // namespace mactune::py

NB_MODULE(_mactune, m) {
  using namespace mactune::py;
  m.doc() =
      "mactune's C++ libraries: dispatch tables, the CPU (and CUDA) decode sessions, replay "
      "and calibration. Import the package `mactune`, not this module.";

  g_error = PyErr_NewExceptionWithDoc("mactune.Error",
                                      "A failure inside mactune (a broken invariant, a CUDA "
                                      "error); the message is one line.",
                                      PyExc_RuntimeError, nullptr);
  nb::object bases = nb::make_tuple(nb::handle(g_error), nb::handle(PyExc_ValueError));
  g_input_error = PyErr_NewExceptionWithDoc(
      "mactune.InputError",
      "Bad input (a shape, a file, a setting): one line naming the value and where it came "
      "from, as the CLI prints after 'mactune: error: '.",
      bases.ptr(), nullptr);
  m.attr("Error") = nb::handle(g_error);
  m.attr("InputError") = nb::handle(g_input_error);
  nb::register_exception_translator(translate);

  nb::dict info;
  info["version"] = mactune::build::version;
  info["git_revision"] = mactune::build::git_revision;
  info["build_type"] = mactune::build::build_type;
  info["compiler"] = mactune::build::compiler;
#if defined(MACTUNE_PY_CUDA)
  info["cuda"] = true;
#else
  info["cuda"] = false;
#endif
  m.attr("build_info") = info;
  m.attr("__version__") = mactune::build::version;

  bind_types(m);
  bind_dispatch(m);
  bind_step_result(m);
  nb::module_ cpu = m.def_submodule("cpu", "The CPU decode engine (kernels/cpu/session.h).");
  bind_cpu(cpu);
#if defined(MACTUNE_PY_CUDA)
  nb::module_ cuda = m.def_submodule("cuda", "The CUDA decode engine (kernels/cuda/session.h).");
  bind_cuda(cuda);
#endif
  bind_replay(m);
  bind_schedule(m);
  nb::module_ testing =
      m.def_submodule("_testing", "Helpers for the test suite and the binding benchmark.");
  bind_testing(testing);
}
