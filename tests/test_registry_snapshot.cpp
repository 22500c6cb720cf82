// The registry snapshot: what the build embeds is the registry its JSON gives, item for item;
// a snapshot reads back every field it was written with; broken bytes are refused cleanly;
// user files still go on top of it and are checked.
#include <gtest/gtest.h>

#include "embedded.hpp"
#include "error.hpp"
#include "fixtures.hpp"
#include "registry.hpp"
#include "registry_snapshot.hpp"

namespace cake {
namespace {
using nlohmann::json;

void expect_same(const Registry& a, const Registry& b) {
  EXPECT_EQ(a.files(), b.files());
  ASSERT_EQ(a.programs().size(), b.programs().size());
  for (size_t i = 0; i < a.programs().size(); ++i)
    EXPECT_TRUE(a.programs()[i] == b.programs()[i]) << a.programs()[i].name;
  ASSERT_EQ(a.builds().size(), b.builds().size());
  for (size_t i = 0; i < a.builds().size(); ++i) EXPECT_TRUE(a.builds()[i] == b.builds()[i]) << a.builds()[i].key();
  ASSERT_EQ(a.routes().size(), b.routes().size());
  for (size_t i = 0; i < a.routes().size(); ++i) EXPECT_TRUE(a.routes()[i] == b.routes()[i]) << a.routes()[i].op;
}

// Every field of every item type set away from its default, in two files.
std::vector<RegistrySource> every_field() {
  json d = test::fixture_registry();
  d["programs"][0]["params"] = {{"tile", 128}, {"counters", 4}, {"note", "x\"y\\\u00e9\x01"}};
  d["programs"][0]["stand_in"] = "p1s";
  json stand_in = d["programs"][0];
  stand_in["name"] = "p1s";
  stand_in.erase("stand_in");
  d["programs"].push_back(stand_in);
  d["builds"].push_back({{"program", "p1s"},
                         {"arch", "sm_90a"},
                         {"min_cuda", "12.8"},
                         {"options", {"--gpu-architecture=sm_90a", "-DX=1"}},
                         {"source_hash", std::string(64, 'c')}});
  json inst = {{"name", "px"},
               {"template", "smxx_elementwise.cuh"},
               {"kernels", {"cake::ew::add<float, float, float, {h}>"}},
               {"archs", {"sm_80", "compute_80"}},
               {"instance", {{"dims", {{"h", {{"divisible", 8}, {"range", {256, 16384}}}}}}, {"prebuild", {{{"h", 4096}}}}}}};
  d["programs"].push_back(inst);
  for (const char* a : {"sm_80", "compute_80"})
    d["builds"].push_back({{"program", "px"},
                           {"arch", a},
                           {"min_cuda", "12.0"},
                           {"options", {std::string("--gpu-architecture=") + a}},
                           {"source_hash", std::string(64, 'd')}});
  json& c = d["routes"][0]["candidates"][0];
  c["window"] = {{"archs", {"sm_90a", "sm_80+"}},
                 {"sm_count", {100, nullptr}},
                 {"dims", {{"t", {1, 65536}}, {"h", {8, 8}}}},
                 {"divisible", {{"h", 8}}},
                 {"parity", {{"t", "odd"}, {"h", "even"}}},
                 {"dtypes", {{"x", "bf16"}, {"y", "f32"}}},
                 {"align", {{"x", 16}}}};
  c["deterministic"] = false;
  c["accumulate"] = "composed";
  c["scratch"] = json::array({{{"dims", {"t", "h"}}, {"dtype_of", "x"}, {"times", 3}},
                              {{"dims", {"h"}}, {"dtype_of", "y"}, {"ceil_div", {"t", 32}}}});
  c["stages"] = {{{"program", "p1"}, {"kernel", 0}, {"bind", {{"a", "x"}, {"out", "scratch.1"}, {"w", "scratch"}}}}};
  c["note"] = "why";
  json user = {{"family", "user_fam"},
               {"routes", {{{"op", "fx.op"}, {"candidates", {{{"name", "u1"}, {"stages", {{{"program", "px"}}}}}}}}}}};
  return {{"fx.json", d.dump()}, {"user.json", user.dump()}};
}

TEST(RegistrySnapshot, EmbeddedSnapshotIsTheParsedRegistry) {
  const auto parsed = Registry::from_sources(Registry::embedded_sources());
  const auto snap = Registry::from_snapshot(embedded_registry_snapshot());
  expect_same(*parsed, *snap);
  // Lookups go through the indexes the snapshot's registry built.
  for (const auto& p : parsed->programs()) EXPECT_EQ(snap->program(p.name)->name, p.name);
  for (const auto& b : parsed->builds()) EXPECT_NE(snap->build(b.program, b.arch), nullptr) << b.key();
  for (const auto& r : parsed->routes()) EXPECT_EQ(snap->route(r.op)->op, r.op);
}

TEST(RegistrySnapshot, EveryFieldReadsBack) {
  const auto parsed = Registry::from_sources(every_field());
  const Candidate& c = parsed->route("fx.op")->candidates.at(1);
  ASSERT_EQ(c.name, "c1");  // the fixture sets what it means to
  ASSERT_EQ(c.window.parity.size(), 2u);
  ASSERT_EQ(c.scratch.buffers.size(), 2u);
  ASSERT_TRUE(parsed->program("px")->parametric());
  const std::string bytes = RegistrySnapshot::write(*parsed);
  const auto back = Registry::from_snapshot(bytes);
  expect_same(*parsed, *back);
  // Origins share their file's name again, and params parse from the text they kept.
  EXPECT_EQ(back->program("p1")->origin.str(), "fx.json: /programs/0");
  EXPECT_EQ(back->route("fx.op")->candidates[0].origin.str(), "user.json: /routes/0/candidates/0");
  EXPECT_EQ(back->program("p1")->params->at("tile"), 128);
  EXPECT_EQ(RegistrySnapshot::write(*back), bytes);
  // An instance of a parametric program read back is made as from the parsed one.
  ASSERT_NE(back->instance(*back->program("px"), {{"h", 4096}}), nullptr);
  EXPECT_EQ(back->instance(*back->program("px"), {{"h", 4096}})->name,
            parsed->instance(*parsed->program("px"), {{"h", 4096}})->name);
}

TEST(RegistrySnapshot, BrokenBytesAreRefused) {
  const std::string bytes = RegistrySnapshot::write(*Registry::from_sources(every_field()));
  // Every prefix: an error, never a crash or a registry.
  for (size_t n = 0; n < bytes.size(); ++n)
    EXPECT_THROW(Registry::from_snapshot(std::string_view(bytes).substr(0, n)), Error) << n;
  EXPECT_THROW(Registry::from_snapshot(bytes + '\0'), Error);
  std::string other = bytes;
  other[0] = 'C';
  EXPECT_THROW(Registry::from_snapshot(other), Error);
  // A number of more than 64 bits (the version, after the magic line, one byte here): nine
  // continuation bytes, then a tenth that carries bits past 64, or that continues.
  const size_t magic = bytes.find('\n') + 1;
  ASSERT_LT(uint8_t(bytes[magic]), 0x80);
  for (const std::string tenth : {std::string("\x02"), std::string("\x81\x00")}) {
    const std::string overlong = bytes.substr(0, magic) + std::string(9, '\x80') + tenth + bytes.substr(magic + 1);
    try {
      Registry::from_snapshot(overlong);
      ADD_FAILURE() << "an overlong number was read";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("longer than 64 bits"), std::string::npos) << e.what();
    }
  }
  // Every byte flipped: an error or a registry, never a crash (ASan runs this too).
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string b = bytes;
    b[i] = char(b[i] ^ 0x5a);
    try {
      Registry::from_snapshot(b);
    } catch (const Error&) {
    }
  }
}

TEST(RegistrySnapshot, UserFilesGoOnTopAndAreChecked) {
  const std::vector<RegistrySource> src = every_field();
  const std::string base = RegistrySnapshot::write(*Registry::from_sources({src[0]}));
  const auto both = Registry::from_snapshot(base, {src[1]});
  expect_same(*Registry::from_sources(src), *both);
  EXPECT_EQ(both->route("fx.op")->candidates.front().name, "u1");

  json bad = {{"routes", {{{"op", "fx.op"}, {"candidates", {{{"name", "u2"}, {"stages", {{{"program", "nope"}}}}}}}}}}};
  try {
    Registry::from_snapshot(base, {{"bad.json", bad.dump()}});
    ADD_FAILURE() << "a user route naming an unknown program was taken";
  } catch (const RegistryError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.json: /routes/0/candidates/0/stages/0/program"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace cake
