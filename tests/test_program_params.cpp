// Program params kept as their registry text and parsed on first use: the value, equality by
// text or by value, and one parse shared by threads that ask at once (run under TSan in CI).
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "program_params.hpp"

namespace cake {
namespace {

TEST(ProgramParams, ParsedOnFirstUseAndComparedAsValues) {
  const auto p = ProgramParams::from_text(R"({"op": "fwd",
      "kernels": [{"out": "bf16"}], "smem": 1024})");
  EXPECT_EQ(p->at("smem"), 1024);
  EXPECT_EQ((*p)["kernels"][0]["out"], "bf16");
  EXPECT_EQ(ProgramParams::from_text(R"({"smem": 1024, "kernels": [{"out": "bf16"}], "op": "fwd"})"), p);
  EXPECT_EQ(ProgramParams(nlohmann::json{{"op", "fwd"}, {"kernels", {{{"out", "bf16"}}}}, {"smem", 1024}}), p);
  EXPECT_FALSE(ProgramParams::from_text(R"({"op": "bwd", "kernels": [{"out": "bf16"}], "smem": 1024})") == p);
  EXPECT_EQ(ProgramParams(), ProgramParams::from_text("{ }"));
  EXPECT_TRUE(ProgramParams()->empty());
}

TEST(ProgramParams, ThreadsShareOneParse) {
  const auto p = ProgramParams::from_text(R"({"tile_m": 128, "tile_n": 256})");
  std::vector<std::thread> threads;
  std::vector<const nlohmann::json*> seen(8);
  for (size_t i = 0; i < seen.size(); ++i)
    threads.emplace_back([&, i] {
      const ProgramParams copy = p;  // copies share the parse
      seen[i] = &copy.json();
      EXPECT_EQ(copy->at("tile_n"), 256);
    });
  for (auto& t : threads) t.join();
  for (const auto* s : seen) EXPECT_EQ(s, &p.json());
}

}  // namespace
}  // namespace cake
