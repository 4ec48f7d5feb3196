// Kernel names in `nsys summary`: base names by default (nsys's shortName, or the demangled name
// shortened the same way when the export has none), the demangled ones on request, both in
// JSON; kernels that share a base name told apart.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "db/nsys.h"
#include "db/nsys_summary.h"
#include "tests/db/fixtures.h"
#include "tests/db/nsys_fixtures.h"

namespace mactune::db {
namespace {

using testing::ExportSchema;
using testing::SynthOp;
using testing::TempDir;

// What PyTorch's fill kernel demangles to (a templated lambda: 300+ characters).
const std::string kFill =
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
    "at::detail::Array<char*, 1>>(int, at::native::FillFunctor<float>, at::detail::Array<char*, "
    "1>)";
const std::string kElementwise1 =
    "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<"
    "at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float>"
    ">>(at::TensorIteratorBase&, at::native::BinaryFunctor<float, float, float, "
    "at::native::binary_internal::MulFunctor<float>> const&)::{lambda(int)#1}>(int, "
    "at::native::gpu_kernel_impl_nocast<at::native::BinaryFunctor<float, float, float, "
    "at::native::binary_internal::MulFunctor<float>>>(at::TensorIteratorBase&, "
    "at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<"
    "float>> const&)::{lambda(int)#1})";
const std::string kElementwise2 =
    "void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<"
    "at::native::AddFunctor<float>>(at::TensorIteratorBase&, at::native::AddFunctor<float> "
    "const&)::{lambda(int)#1}>(int, at::native::gpu_kernel_impl_nocast<at::native::AddFunctor<"
    "float>>(at::TensorIteratorBase&, at::native::AddFunctor<float> const&)::{lambda(int)#1})";

TEST(Db_NsysNames, ShortNamesAreBaseNames) {
  EXPECT_EQ(short_kernel_name(kFill), "vectorized_elementwise_kernel");
  EXPECT_EQ(short_kernel_name(kElementwise1), "elementwise_kernel");
  EXPECT_EQ(short_kernel_name("saxpy(double *, double *, double *, double, int)"), "saxpy");
  EXPECT_EQ(short_kernel_name("void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_128x256>("
                              "cutlass_80_tensorop_bf16_s16816gemm_128x256::Params)"),
            "Kernel2");
  EXPECT_EQ(short_kernel_name("void (anonymous namespace)::softmax_warp_forward<float, float, 8>("
                              "float*, float const*, int)"),
            "softmax_warp_forward");
  EXPECT_EQ(short_kernel_name("void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 64>, "
                              "true>(flash::Flash_fwd_params)"),
            "flash_fwd_kernel");
  EXPECT_EQ(short_kernel_name("void merge_kernel()"), "merge_kernel");
  EXPECT_EQ(short_kernel_name("Functor<int>::operator()(int) const"), "operator()");
  EXPECT_EQ(short_kernel_name("std::enable_if<true, void>::type scale<float>(float*)"), "scale");
  // Nothing to remove, or nothing that parses: unchanged.
  for (const char* same :
       {"ampere_sgemm_128x64_nn", "_Z6kernelPfS_i", "void broken<int(", "(int)", ""})
    EXPECT_EQ(short_kernel_name(same), same);
}

testing::SynthProfile three_kernels() {
  testing::SynthProfile p;
  std::int64_t corr = 1, t = 1000;
  const auto kernel = [&](const std::string& name, std::int64_t ns) {
    p.ops.push_back({SynthOp::kernel, t, t + ns, name, 100, corr++, t - 500, 101});
    t += ns + 1000;
  };
  kernel(kElementwise1, 300);
  kernel(kElementwise1, 300);
  kernel(kElementwise2, 200);
  kernel(kFill, 100);
  return p;
}

TEST(Db_NsysNames, TablesPrintBaseNamesAndFullNamesOnRequest) {
  TempDir dir;
  testing::write_export(dir.file("r.sqlite"), ExportSchema::v3_16, three_kernels());
  const NsysSummary s = summarize_nsys_report(dir.file("r.sqlite"), {});
  ASSERT_EQ(s.kernel_rows.size(), 3u);
  EXPECT_EQ(s.kernel_rows[0].name, kElementwise1);  // rows stay per demangled name
  EXPECT_EQ(s.kernel_rows[0].short_name, "elementwise_kernel");
  EXPECT_EQ(s.kernel_rows[1].short_name, "elementwise_kernel");
  EXPECT_EQ(s.kernel_rows[2].short_name, "vectorized_elementwise_kernel");

  std::ostringstream plain, full;
  print_nsys_summary(plain, s, NsysTableStyle::plain, 20);
  print_nsys_summary(full, s, NsysTableStyle::plain, 20, NsysKernelNames::full);
  EXPECT_NE(plain.str().find("elementwise_kernel (1 of 2)"), std::string::npos) << plain.str();
  EXPECT_NE(plain.str().find("elementwise_kernel (2 of 2)"), std::string::npos) << plain.str();
  EXPECT_NE(plain.str().find("  vectorized_elementwise_kernel\n"), std::string::npos)
      << plain.str();
  EXPECT_NE(plain.str().find("numbered (k of n); --full-names"), std::string::npos) << plain.str();
  EXPECT_EQ(plain.str().find("at::native"), std::string::npos) << plain.str();
  std::istringstream lines(plain.str());
  for (std::string line; std::getline(lines, line);)
    EXPECT_LT(line.size(), 140u) << "a terminal reads it: " << line;
  for (const std::string& name : {kElementwise1, kElementwise2, kFill})
    EXPECT_NE(full.str().find(name), std::string::npos) << full.str();
  EXPECT_EQ(full.str().find("(1 of 2)"), std::string::npos);

  const auto j = nlohmann::json::parse(nsys_summary_json(s));
  EXPECT_EQ(j["kernels"][0]["name"], kElementwise1);
  EXPECT_EQ(j["kernels"][0]["short_name"], "elementwise_kernel");
  EXPECT_EQ(j["kernels"][2]["short_name"], "vectorized_elementwise_kernel");
}

// An export whose kernels have no shortName (or an import of one): the summary shortens the
// demangled name itself, alike.
TEST(Db_NsysNames, WithoutAStoredShortNameTheDemangledOneIsShortened) {
  TempDir dir;
  testing::write_export(dir.file("r.sqlite"), ExportSchema::real_2_9_1, three_kernels());
  Store store = Store::open(dir.file("s.db"));
  const NsysImport imp = import_nsys(store, dir.file("r.sqlite"));
  store.connection().exec("UPDATE nsys_kernels SET short_name = ''");
  const NsysSummary s = summarize_nsys(store, imp.report_id, {});
  ASSERT_EQ(s.kernel_rows.size(), 3u);
  EXPECT_EQ(s.kernel_rows[0].short_name, "elementwise_kernel");
  EXPECT_EQ(s.kernel_rows[2].short_name, "vectorized_elementwise_kernel");
}

TEST(Db_NsysNames, RealExportGoesBySaxpy) {
  const NsysSummary s = summarize_nsys_report(testing::real_export_path(), {});
  ASSERT_EQ(s.kernel_rows.size(), 1u);
  EXPECT_EQ(s.kernel_rows[0].short_name, "saxpy");               // the export's own shortName
  EXPECT_EQ(short_kernel_name(s.kernel_rows[0].name), "saxpy");  // and ours agrees
  std::ostringstream text;
  print_nsys_summary(text, s, NsysTableStyle::plain, 20);
  EXPECT_NE(text.str().find("  saxpy: 100.0% saxpy x5"), std::string::npos) << text.str();
  EXPECT_EQ(text.str().find("double *"), std::string::npos) << text.str();
}

}  // namespace
}  // namespace mactune::db
