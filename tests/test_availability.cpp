// The loader's static rule with fixture aot/ folders and injected NVRTC versions.
#include <gtest/gtest.h>

#include "availability.hpp"
#include "error.hpp"
#include "fixtures.hpp"
#include "test_util.hpp"

namespace cake {
namespace {
using nlohmann::json;

const Arch kHopper = *Arch::parse("sm_90a");
const Arch kAmpere = *Arch::parse("sm_80");

NvrtcInfo nvrtc(const std::string& version, std::vector<int> archs = {80, 86, 89, 90, 100}) {
  NvrtcInfo n;
  n.present = true;
  n.version = *CudaVersion::parse(version);
  n.archs = std::move(archs);
  n.path = "libnvrtc.so.fake";
  return n;
}

NvrtcInfo no_nvrtc() {
  NvrtcInfo n;
  n.missing_reason = "libnvrtc not found (test)";
  return n;
}

// p1 (sm_90a) needs CUDA 99.0: beyond any toolkit.
std::shared_ptr<const Registry> registry_with_future_build() {
  json d = test::fixture_registry();
  d["builds"][0]["min_cuda"] = "99.0";
  return Registry::from_sources({{"fx.json", d.dump()}});
}

// A fixture aot folder holding p1@sm_90a built from `hash`.
AotManifest aot_with(const test::TempDir& dir, const std::string& hash) {
  dir.write("aot/sm_90a/p1.cubin", "not really a cubin");
  AotManifest m(dir.path() / "aot");
  AotEntry e;
  e.program = "p1";
  e.arch = "sm_90a";
  e.source_hash = hash;
  e.toolkit = "99.0";
  e.file = "sm_90a/p1.cubin";
  e.sha256 = std::string(64, '0');
  e.size = 18;
  e.lowered_names = {"_Z2p1v"};
  m.put(e);
  m.write();
  return AotManifest::read(dir.path() / "aot");
}

TEST(Availability, MinCudaAboveToolkitIsUnavailableWithoutAot) {
  auto reg = registry_with_future_build();
  AvailabilityRule rule(*reg, nullptr, nvrtc("13.0"));
  auto a = rule.check(*reg->program("p1"), kHopper);
  EXPECT_FALSE(a.available());
  EXPECT_EQ(a.reason, "min_cuda");
  EXPECT_NE(a.detail.find("needs CUDA >= 99.0, NVRTC is 13.0"), std::string::npos) << a.detail;
}

TEST(Availability, MinCudaAboveToolkitIsAvailableWithAPrebuiltCubin) {
  auto reg = registry_with_future_build();
  test::TempDir dir;
  AotManifest aot = aot_with(dir, test::kHash);
  AvailabilityRule rule(*reg, &aot, nvrtc("13.0"));
  auto a = rule.check(*reg->program("p1"), kHopper);
  EXPECT_TRUE(a.available());
  EXPECT_EQ(a.by, ServedBy::aot);
}

TEST(Availability, AotWorksWithoutNvrtc) {
  auto reg = registry_with_future_build();
  test::TempDir dir;
  AotManifest aot = aot_with(dir, test::kHash);
  AvailabilityRule rule(*reg, &aot, no_nvrtc());
  EXPECT_EQ(rule.check(*reg->program("p1"), kHopper).by, ServedBy::aot);
  auto p2 = rule.check(*reg->program("p2"), kHopper);  // not prebuilt
  EXPECT_FALSE(p2.available());
  EXPECT_EQ(p2.reason, "no_nvrtc");
}

TEST(Availability, StaleAotCubinIsNotUsed) {
  auto reg = registry_with_future_build();
  test::TempDir dir;
  AotManifest aot = aot_with(dir, std::string(64, 'b'));  // built from another source
  AvailabilityRule without(*reg, &aot, no_nvrtc());
  auto a = without.check(*reg->program("p1"), kHopper);
  EXPECT_FALSE(a.available());
  EXPECT_EQ(a.reason, "stale_aot");
  // With a toolkit new enough, the stale cubin is ignored and the build JITs.
  json d = test::fixture_registry();
  auto reg2 = Registry::from_sources({{"fx.json", d.dump()}});
  AvailabilityRule with(*reg2, &aot, nvrtc("13.0"));
  EXPECT_EQ(with.check(*reg2->program("p1"), kHopper).by, ServedBy::jit);
}

TEST(Availability, AotEntryWhoseFileIsMissingDoesNotCount) {
  auto reg = registry_with_future_build();
  test::TempDir dir;
  AotManifest aot = aot_with(dir, test::kHash);
  std::filesystem::remove(dir.path() / "aot/sm_90a/p1.cubin");
  AvailabilityRule rule(*reg, &aot, nvrtc("13.0"));
  EXPECT_EQ(rule.check(*reg->program("p1"), kHopper).reason, "min_cuda");
}

TEST(Availability, NvrtcThatDoesNotKnowTheArch) {
  json d = test::fixture_registry();
  auto reg = Registry::from_sources({{"fx.json", d.dump()}});
  AvailabilityRule rule(*reg, nullptr, nvrtc("13.0", {75, 80}));
  auto a = rule.check(*reg->program("p1"), kHopper);
  EXPECT_EQ(a.reason, "arch");
}

TEST(Availability, JitDisabled) {
  json d = test::fixture_registry();
  auto reg = Registry::from_sources({{"fx.json", d.dump()}});
  AvailabilityRule rule(*reg, nullptr, nvrtc("13.0"), /*jit_enabled=*/false);
  EXPECT_EQ(rule.check(*reg->program("p1"), kHopper).reason, "jit_disabled");
}

TEST(Availability, NoBuildRunsOnTheDevice) {
  json d = test::fixture_registry();
  auto reg = Registry::from_sources({{"fx.json", d.dump()}});
  AvailabilityRule rule(*reg, nullptr, nvrtc("13.0"));
  auto a = rule.check(*reg->program("p1"), kAmpere);  // p1 is sm_90a only
  EXPECT_EQ(a.reason, "no_build");
  auto b = rule.check(*reg->program("p2"), *Arch::parse("sm_86"));  // sm_80 build runs on sm_86
  EXPECT_TRUE(b.available());
  EXPECT_EQ(b.build->arch, kAmpere);
  auto c = rule.check(*reg->program("p2"), kHopper);  // exact arch preferred
  EXPECT_EQ(c.build->arch, kHopper);
}

TEST(Availability, ArchRunsOn) {
  EXPECT_TRUE(Arch::parse("sm_80")->runs_on(*Arch::parse("sm_89")));
  EXPECT_FALSE(Arch::parse("sm_89")->runs_on(*Arch::parse("sm_80")));
  EXPECT_FALSE(Arch::parse("sm_80")->runs_on(*Arch::parse("sm_90a")));
  EXPECT_TRUE(Arch::parse("sm_90a")->runs_on(*Arch::parse("sm_90a")));
  EXPECT_FALSE(Arch::parse("sm_100a")->runs_on(*Arch::parse("sm_103a")));
  EXPECT_FALSE(Arch::parse("sm_9").has_value());
  EXPECT_EQ(Arch::parse("sm_100a")->str(), "sm_100a");
}

TEST(AotManifest, MalformedManifestIsReported) {
  test::TempDir dir;
  dir.write("aot/manifest.json", "{\"format\": 1, \"entries\": [{\"program\": 3}]}");
  EXPECT_THROW(AotManifest::read(dir.path() / "aot"), Error);
  dir.write("aot/manifest.json", "{\"format\": 7, \"entries\": []}");
  EXPECT_THROW(AotManifest::read(dir.path() / "aot"), Error);
}

TEST(AotManifest, EntryEscapingTheFolderIsRejected) {
  test::TempDir dir;
  json e = {{"program", "p1"}, {"arch", "sm_90a"}, {"source_hash", test::kHash}, {"toolkit", "13.0"},
            {"options", json::array()}, {"file", "../../outside.cubin"}, {"sha256", test::kHash},
            {"size", 1}, {"lowered_names", json::array()}};
  dir.write("aot/manifest.json", json{{"format", 1}, {"entries", {e}}}.dump());
  EXPECT_THROW(AotManifest::read(dir.path() / "aot"), Error);
}

TEST(AotManifest, MissingManifestIsEmpty) {
  test::TempDir dir;
  EXPECT_TRUE(AotManifest::read(dir.path() / "nothing").entries().empty());
}

}  // namespace
}  // namespace cake
