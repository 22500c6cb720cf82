// Every arch from sm_80 up (no GPU): virtual archs and the PTX builds of portable programs,
// cubin builds derived for archs the registry does not list, the order in which a device's
// builds are tried, how each is served (NVRTC's arch list, aot/, JIT off), and the plans the
// embedded registry gives on sm_86, sm_89, sm_100a, sm_103a, sm_120a and an arch newer than
// NVRTC knows.
#include <gtest/gtest.h>

#include "availability.hpp"
#include "derived_builds.hpp"
#include "error.hpp"
#include "fixtures.hpp"
#include "planner.hpp"
#include "test_util.hpp"

namespace cake {
namespace {
using nlohmann::json;

Arch arch(const std::string& s) { return *Arch::parse(s); }

// NVRTC 13.0's list (nvrtcGetSupportedArchs): no 130.
NvrtcInfo nvrtc13() {
  NvrtcInfo n;
  n.present = true;
  n.version = {13, 0};
  n.archs = {75, 80, 86, 87, 88, 89, 90, 100, 103, 110, 120, 121};
  n.path = "libnvrtc.so.fake";
  return n;
}

// The fixture plus p3: portable (sm_80, sm_90a, compute_80). p1 is Hopper only (sm_90a).
std::shared_ptr<const Registry> portable_registry() {
  json d = test::fixture_registry();
  d["programs"].push_back({{"name", "p3"},
                           {"template", "smxx_elementwise.cuh"},
                           {"kernels", {"cake::ew::add<float, float, float, 1>"}},
                           {"archs", {"sm_80", "sm_90a", "compute_80"}}});
  for (std::string a : {"sm_80", "sm_90a", "compute_80"})
    d["builds"].push_back({{"program", "p3"},
                           {"arch", a},
                           {"min_cuda", "12.0"},
                           {"options", {"--gpu-architecture=" + a, "--std=c++17"}},
                           {"source_hash", test::kHash}});
  return Registry::from_sources({{"fx.json", d.dump()}});
}

std::vector<std::string> keys(const std::vector<const Build*>& builds) {
  std::vector<std::string> out;
  for (const Build* b : builds) out.push_back(b->key());
  return out;
}

TEST(EveryArch, VirtualArchsParseAndRunOnEveryLaterArch) {
  const Arch c80 = arch("compute_80");
  EXPECT_TRUE(c80.virt);
  EXPECT_EQ(c80.str(), "compute_80");
  EXPECT_EQ(c80.number(), 80);
  for (std::string d : {"sm_80", "sm_86", "sm_90a", "sm_100a", "sm_120a", "sm_130"})
    EXPECT_TRUE(c80.runs_on(arch(d))) << d;
  EXPECT_FALSE(c80.runs_on(arch("sm_75")));
  EXPECT_FALSE(arch("compute_90a").runs_on(arch("sm_100a")));  // arch-specific PTX: its own chip only
  EXPECT_EQ(arch("compute_90a").plain(), arch("sm_90"));
  EXPECT_EQ(arch("sm_100a").plain().str(), "sm_100");
  EXPECT_NE(arch("compute_80"), arch("sm_80"));
  EXPECT_FALSE(Arch::parse("compute80").has_value());
  EXPECT_FALSE(Arch::parse("virtual_80").has_value());
}

TEST(EveryArch, ArchAndVersionParsersRefuseWhatIsMalformed) {
  for (std::string ok : {"sm_80", "sm_86", "sm_90a", "sm_100a", "sm_103f", "sm_120", "compute_80", "compute_90a"})
    EXPECT_EQ(Arch::parse(ok)->str(), ok);
  for (std::string bad : {"", "sm_", "sm_8", "sm_08", "sm_1000", "sm_90b", "sm_90aa", "sm90", "SM_90", "compute_",
                          "compute_8", " sm_90", "sm_90 ", "sm_9a", "sm_-90"})
    EXPECT_FALSE(Arch::parse(bad).has_value()) << "'" << bad << "'";
  EXPECT_EQ(*CudaVersion::parse("13.0"), (CudaVersion{13, 0}));
  EXPECT_EQ(*CudaVersion::parse("12.10"), (CudaVersion{12, 10}));
  for (std::string bad : {"", "13", "13.", ".0", "13.0.1", "1234.0", "13,0", "a.b", " 13.0"})
    EXPECT_FALSE(CudaVersion::parse(bad).has_value()) << "'" << bad << "'";
}

TEST(EveryArch, RetargetReplacesTheArchOptionOnly) {
  const std::vector<std::string> opts = {"--gpu-architecture=compute_80", "--std=c++17", "--fmad=true"};
  EXPECT_EQ(retarget_options(opts, arch("sm_100")),
            (std::vector<std::string>{"--gpu-architecture=sm_100", "--std=c++17", "--fmad=true"}));
  EXPECT_EQ(retarget_options({"-arch=compute_80"}, arch("sm_120")), (std::vector<std::string>{"-arch=sm_120"}));
  EXPECT_EQ(retarget_options({"--std=c++17"}, arch("sm_89")),
            (std::vector<std::string>{"--gpu-architecture=sm_89", "--std=c++17"}));
}

TEST(EveryArch, WindowsNameDeviceArchsOnly) {
  json d = test::fixture_registry();
  d["routes"][0]["candidates"][0]["window"]["archs"] = {"compute_80+"};
  try {
    Registry::from_sources({{"fx.json", d.dump()}});
    FAIL() << "a virtual arch in a window was accepted";
  } catch (const RegistryError& e) {
    EXPECT_NE(std::string(e.what()).find("virtual arch"), std::string::npos) << e.what();
  }
}

TEST(EveryArch, DeviceBuildsInTheOrderTheyAreTried) {
  auto reg = portable_registry();
  const Program& p3 = *reg->program("p3");
  // A listed cubin that runs there first, then the PTX.
  EXPECT_EQ(keys(reg->device_builds(p3, arch("sm_80"))), (std::vector<std::string>{"p3@sm_80", "p3@compute_80"}));
  EXPECT_EQ(keys(reg->device_builds(p3, arch("sm_86"))), (std::vector<std::string>{"p3@sm_80", "p3@compute_80"}));
  EXPECT_EQ(keys(reg->device_builds(p3, arch("sm_89"))), (std::vector<std::string>{"p3@sm_80", "p3@compute_80"}));
  EXPECT_EQ(keys(reg->device_builds(p3, arch("sm_90a"))), (std::vector<std::string>{"p3@sm_90a", "p3@compute_80"}));
  // No listed cubin runs there: one made for the device's plain arch.
  for (std::string d : {"sm_100a", "sm_103a", "sm_120a", "sm_130"}) {
    const std::string plain = arch(d).plain().str();
    EXPECT_EQ(keys(reg->device_builds(p3, arch(d))), (std::vector<std::string>{"p3@" + plain, "p3@compute_80"})) << d;
  }
  // Derived: the virtual build's hash and min_cuda, its options retargeted; made once.
  const Build* b = reg->build("p3", arch("sm_100"));
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->source_hash, test::kHash);
  EXPECT_EQ(b->options, (std::vector<std::string>{"--gpu-architecture=sm_100", "--std=c++17"}));
  EXPECT_EQ(reg->build("p3", arch("sm_100")), b);
  EXPECT_EQ(reg->device_builds(p3, arch("sm_100a")).front(), b);
  // Nothing derives an arch-specific or virtual build, nor anything for a Hopper-only program.
  EXPECT_EQ(reg->build("p3", arch("sm_100a")), nullptr);
  EXPECT_EQ(reg->build("p3", arch("compute_90")), nullptr);
  EXPECT_EQ(reg->build("p3", arch("sm_75")), nullptr);
  EXPECT_TRUE(reg->device_builds(*reg->program("p1"), arch("sm_100a")).empty());
  EXPECT_EQ(reg->build("p1", arch("sm_100")), nullptr);
}

TEST(EveryArch, HowEachDeviceIsServed) {
  auto reg = portable_registry();
  const Program& p3 = *reg->program("p3");
  AvailabilityRule rule(*reg, nullptr, nvrtc13());
  for (std::string d : {"sm_86", "sm_89", "sm_100a", "sm_103a", "sm_120a"}) {
    Availability a = rule.check(p3, arch(d));
    ASSERT_TRUE(a.available()) << d << ": " << a.detail;
    EXPECT_EQ(a.by, ServedBy::jit) << d;
    EXPECT_FALSE(a.build->arch.virt) << d;  // a cubin, not the PTX
  }
  EXPECT_EQ(rule.check(p3, arch("sm_100a")).build->arch.str(), "sm_100");
  // NVRTC does not know sm_130: it compiles the PTX, which the driver compiles for the device.
  Availability a = rule.check(p3, arch("sm_130"));
  ASSERT_TRUE(a.available()) << a.detail;
  EXPECT_EQ(a.build->key(), "p3@compute_80");
  EXPECT_NE(a.detail.find("PTX for compute_80"), std::string::npos) << a.detail;
  EXPECT_NE(a.detail.find("cannot compile for sm_130"), std::string::npos) << a.detail;
  // A Hopper-only program stays Hopper-only.
  EXPECT_EQ(rule.check(*reg->program("p1"), arch("sm_100a")).reason, "no_build");
}

TEST(EveryArch, PtxFromAotServesADeviceNothingElseCan) {
  auto reg = portable_registry();
  const Program& p3 = *reg->program("p3");
  test::TempDir dir;
  dir.write("aot/compute_80/p3.ptx", ".version 9.0\n.target sm_80\n");
  AotManifest m(dir.path() / "aot");
  AotEntry e;
  e.program = "p3";
  e.arch = "compute_80";
  e.source_hash = test::kHash;
  e.toolkit = "13.0";
  e.file = "compute_80/p3.ptx";
  e.sha256 = std::string(64, '0');
  e.size = 29;
  m.put(e);
  m.write();
  const AotManifest aot = AotManifest::read(dir.path() / "aot");
  AvailabilityRule jit_off(*reg, &aot, nvrtc13(), /*jit_enabled=*/false);
  for (std::string d : {"sm_86", "sm_90a", "sm_100a", "sm_130"}) {
    Availability a = jit_off.check(p3, arch(d));
    ASSERT_TRUE(a.available()) << d;
    EXPECT_EQ(a.by, ServedBy::aot) << d;
    EXPECT_EQ(a.build->key(), "p3@compute_80") << d;
  }
  AvailabilityRule nothing(*reg, nullptr, nvrtc13(), /*jit_enabled=*/false);
  EXPECT_EQ(nothing.check(p3, arch("sm_130")).reason, "jit_disabled");
}

// The embedded registry: grouped_gemm, rmsnorm and elementwise ops have a route on every arch
// from sm_80, served by a cubin JIT-compiled for the device where NVRTC knows its arch.
TEST(EveryArch, EmbeddedRoutesOnEveryArch) {
  auto reg = Registry::load_default();
  AvailabilityRule rule(*reg, nullptr, nvrtc13());
  Planner planner(reg, [&](const Program& p, const Arch& a) { return rule.check(p, a); });
  Problem gg;
  gg.op = "grouped_gemm.fwd";
  gg.dims = {{"m", 4096}, {"n", 4096}, {"k", 4096}, {"e", 8}};
  for (std::string t : {"x", "w", "y", "offs"}) gg.dtypes[t] = t == "offs" ? DType::i32 : DType::bf16, gg.align[t] = 256;
  Problem rms;
  rms.op = "rmsnorm.fwd";
  rms.dims = {{"t", 65536}, {"h", 7168}, {"residual", 0}};
  rms.dtypes = {{"x", DType::bf16}, {"y", DType::bf16}, {"w", DType::bf16}, {"rstd", DType::f32}};
  for (std::string t : {"x", "y", "w", "rstd"}) rms.align[t] = 256;
  Problem add;
  add.op = "elementwise.add";
  add.dims = {{"n", 1 << 20}};
  add.dtypes = {{"a", DType::f32}, {"b", DType::f32}, {"out", DType::f32}};
  add.align = {{"a", 256}, {"b", 256}, {"out", 256}};
  struct Want {
    std::string device, build_arch;
  };
  for (const Want& w : {Want{"sm_80", "sm_80"}, Want{"sm_86", "sm_80"}, Want{"sm_89", "sm_80"}, Want{"sm_90a", "sm_90a"},
                        Want{"sm_100a", "sm_100"}, Want{"sm_103a", "sm_103"}, Want{"sm_120a", "sm_120"},
                        Want{"sm_130", "compute_80"}}) {
    for (const Problem* p : {&gg, &rms, &add}) {
      PlanResult r = planner.plan(*p, Device{arch(w.device), 148, 0});
      ASSERT_TRUE(r.ok()) << p->op << " on " << w.device << ": " << r.error;
      for (const PlannedStage& s : r.plan->stages) {
        EXPECT_EQ(s.served_by, ServedBy::jit) << p->op << " on " << w.device;
        // Hopper's own programs serve sm_90a; every other arch gets the portable ones.
        if (w.device != "sm_90a") EXPECT_EQ(s.build->arch.str(), w.build_arch) << p->op << " on " << w.device;
      }
    }
  }
}

}  // namespace
}  // namespace cake
