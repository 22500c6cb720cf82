// The renderer: golden sources, the include closure, and the promise that build.json's
// source hash is the hash of exactly what the runtime compiles.
#include <gtest/gtest.h>

#include <cstdlib>
#include <sstream>

#include "error.hpp"
#include "file_util.hpp"
#include "registry.hpp"
#include "render_files.hpp"
#include "renderer.hpp"
#include "test_util.hpp"

namespace cake {
namespace {

const std::filesystem::path kSource = CAKE_SOURCE_DIR;

class Golden : public ::testing::TestWithParam<const char*> {};

TEST_P(Golden, RenderedSourceMatchesGoldenFile) {
  auto reg = Registry::load_default();
  const Program* p = reg->program(GetParam());
  ASSERT_NE(p, nullptr);
  RenderedProgram r = render(*p);
  auto golden_path = kSource / "tests/golden" / (std::string(GetParam()) + ".cu");
  if (std::getenv("CAKE_UPDATE_GOLDEN")) write_file_atomic(golden_path, r.source);
  auto golden = read_file(golden_path);
  ASSERT_TRUE(golden) << "missing " << golden_path << " (CAKE_UPDATE_GOLDEN=1 writes it)";
  EXPECT_EQ(r.source, *golden) << "rendered source changed; if intended, rerun with CAKE_UPDATE_GOLDEN=1";
}

INSTANTIATE_TEST_SUITE_P(Elementwise, Golden,
                         ::testing::Values("ew_add_f32_v4", "ew_cast_bf16_f32_v1",
                                           "ew_cast_acc_f32_bf16_v8"));

TEST(Renderer, BuildJsonHashIsTheHashOfWhatTheRuntimeRenders) {
  auto reg = Registry::load_default();
  ASSERT_FALSE(reg->builds().empty());
  for (const auto& b : reg->builds()) {
    RenderedProgram r = render(*reg->program(b.program));
    EXPECT_EQ(r.source_hash, b.source_hash) << b.key() << ": build.json is stale";
  }
}

TEST(Renderer, IncludeClosureFollowsNestedIncludes) {
  auto closure = include_closure("smxx_elementwise.cuh");
  std::vector<std::string> names;
  for (const auto& [name, text] : closure) names.push_back(name);
  // The template, its contract header, the shared types, and what both of those include.
  EXPECT_EQ(names, (std::vector<std::string>{"contract_base.h", "elementwise_contract.h", "smxx_elementwise.cuh",
                                             "smxx_types.cuh"}));
  EXPECT_THROW(include_closure("missing.cuh"), Error);
}

TEST(Renderer, HashDependsOnKernelsAndIsStable) {
  auto reg = Registry::load_default();
  Program p = *reg->program("ew_add_f32_v1");
  auto a = render(p);
  EXPECT_EQ(a.source_hash, render(p).source_hash);
  p.kernels = {"cake::ew::add<float, float, float, 2>"};
  EXPECT_NE(a.source_hash, render(p).source_hash);
  p = *reg->program("ew_add_f32_v1");
  p.name = "renamed";
  EXPECT_NE(a.source_hash, render(p).source_hash);  // the name is in the source's first line
}

TEST(Renderer, NoHostCodeAndOneInclude) {
  auto r = render(*Registry::load_default()->program("ew_add_bf16_v8"));
  EXPECT_NE(r.source.find("#include \"smxx_elementwise.cuh\""), std::string::npos);
  EXPECT_EQ(r.name_expressions.size(), 1u);
  EXPECT_EQ(r.name_expressions[0], "cake::ew::add<cake::bf16, cake::bf16, cake::bf16, 8>");
}

TEST(RenderFiles, CheckedInGeneratedFilesAreCurrent) {
  auto files = codegen::generated_files(codegen::all_families());
  std::ostringstream diff;
  EXPECT_EQ(codegen::check_generated(kSource.string(), files, diff), 0) << diff.str();
}

TEST(RenderFiles, GeneratedFilesStartWithTheGeneratedLine) {
  for (const auto& [path, text] : codegen::generated_files(codegen::all_families()))
    EXPECT_NE(text.substr(0, text.find('\n')).find(codegen::kGeneratedLine), std::string::npos) << path;
}

TEST(RenderFiles, WriteThenCheckThenDetectDrift) {
  test::TempDir dir;
  auto files = codegen::generated_files(codegen::all_families());
  std::ostringstream log;
  EXPECT_EQ(codegen::write_generated(dir.path().string(), files, log), int(files.size()));
  EXPECT_EQ(codegen::write_generated(dir.path().string(), files, log), 0);  // nothing changed
  EXPECT_EQ(codegen::check_generated(dir.path().string(), files, log), 0);
  auto text = *read_file(dir.path() / "build.json");
  text.replace(text.find("\"12.0\""), 6, "\"11.0\"");
  dir.write("build.json", text);
  dir.write("registry/orphan.json", "{}");
  std::ostringstream diff;
  EXPECT_EQ(codegen::check_generated(dir.path().string(), files, diff), 2);
  EXPECT_NE(diff.str().find("-      \"min_cuda\": \"11.0\","), std::string::npos) << diff.str();
  EXPECT_NE(diff.str().find("+      \"min_cuda\": \"12.0\","), std::string::npos) << diff.str();
  EXPECT_NE(diff.str().find("registry/orphan.json"), std::string::npos) << diff.str();
}

TEST(RenderFiles, TextDiffShowsOnlyTheChangedRegion) {
  std::string d = codegen::text_diff("f", "a\nb\nc\nd\ne\n", "a\nb\nX\nd\ne\n");
  EXPECT_NE(d.find("-c\n+X\n"), std::string::npos) << d;
  EXPECT_EQ(d.find("-a"), std::string::npos) << d;
}

}  // namespace
}  // namespace cake
