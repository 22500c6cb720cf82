// The loader without a GPU: cache keys, the disk cache (write, read, corrupt, racing
// processes), single flight against a fake compiler, aot/ checks, error paths.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <csignal>
#include <chrono>
#include <fstream>
#include <thread>

#include "error.hpp"
#include "file_util.hpp"
#include "loader.hpp"
#include "registry.hpp"
#include "renderer.hpp"
#include "sha256.hpp"
#include "fixtures.hpp"
#include "test_util.hpp"

namespace cake {
namespace {

const Arch kHopper = *Arch::parse("sm_90a");

struct Fixture {
  std::shared_ptr<const Registry> reg = Registry::load_default();
  const Program& program = *reg->program("ew_add_f32_v1");
  const Build& build = *reg->build("ew_add_f32_v1", kHopper);
};

TEST(CacheKey, EveryPartOfTheContentChangesTheKey) {
  Fixture f;
  RenderedProgram r = render(f.program);
  std::vector<std::string> opts = {"--gpu-architecture=sm_90a"};
  std::string base = cache_key(r, "sm_90a", opts, "13.0");
  EXPECT_EQ(base, cache_key(render(f.program), "sm_90a", opts, "13.0"));  // content only
  auto changed = r;
  changed.source += " ";
  EXPECT_NE(base, cache_key(changed, "sm_90a", opts, "13.0"));
  changed = r;
  changed.headers.back().second += "\n";
  EXPECT_NE(base, cache_key(changed, "sm_90a", opts, "13.0"));
  changed = r;
  changed.name_expressions[0] += " ";
  EXPECT_NE(base, cache_key(changed, "sm_90a", opts, "13.0"));
  EXPECT_NE(base, cache_key(r, "sm_90a", {"--gpu-architecture=sm_90a", "-G"}, "13.0"));
  EXPECT_NE(base, cache_key(r, "sm_90a", opts, "13.1"));
  EXPECT_NE(base, cache_key(r, "sm_80", opts, "13.0"));
}

TEST(DiskCache, WriteReadAndList) {
  test::TempDir dir;
  DiskCache cache(dir.path());
  std::string key(64, 'd');
  EXPECT_FALSE(cache.get(key));
  ASSERT_TRUE(cache.put(key, "prog", {"cubin bytes", {"_Zk"}}));
  auto hit = cache.get(key);
  ASSERT_TRUE(hit);
  EXPECT_EQ(hit->cubin, "cubin bytes");
  EXPECT_EQ(hit->lowered_names, std::vector<std::string>{"_Zk"});
  auto entries = cache.list();
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].program, "prog");
  EXPECT_EQ(cache.clear(), 1);
  EXPECT_FALSE(cache.get(key));
}

TEST(DiskCache, CorruptEntriesAreRemovedAndReportedAbsent) {
  test::TempDir dir;
  DiskCache cache(dir.path());
  std::string key(64, 'e');
  auto corrupt = [&](auto mutate) {
    ASSERT_TRUE(cache.put(key, "prog", {std::string(1000, 'x'), {"_Zk"}}));
    auto text = *read_file(cache.entry_path(key));
    mutate(text);
    std::ofstream(cache.entry_path(key), std::ios::binary | std::ios::trunc) << text;
    EXPECT_FALSE(cache.get(key));
    EXPECT_FALSE(std::filesystem::exists(cache.entry_path(key)));
  };
  corrupt([](std::string& t) { t[t.size() - 10] ^= 1; });         // flipped bit in the cubin
  corrupt([](std::string& t) { t.resize(t.size() - 100); });      // truncated
  corrupt([](std::string& t) { t = "garbage"; });                 // not an entry
  corrupt([](std::string& t) { t.replace(t.find("\"key\":\"") + 7, 1, "f"); });  // another key
}

TEST(DiskCache, UnwritableFolderDegradesToMemory) {
  DiskCache cache("/dev/null/cannot-exist");
  EXPECT_FALSE(cache.put(std::string(64, 'a'), "p", {"x", {}}));
  EXPECT_FALSE(cache.get(std::string(64, 'a')));
}

TEST(Loader, SingleFlightManyThreads) {
  Fixture f;
  std::atomic<int> compiles{0};
  LoaderOptions o;
  o.nvrtc_version = [] { return std::string("13.0"); };
  o.compile = [&](const RenderedProgram& p, const Arch&, const std::vector<std::string>&) {
    ++compiles;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return test::fake_binary(p);
  };
  Loader loader(o);
  std::vector<std::thread> threads;
  std::vector<const LoadedBinary*> got(32);
  for (int i = 0; i < 32; ++i)
    threads.emplace_back([&, i] { got[size_t(i)] = loader.binary(f.program, f.build).get(); });
  for (auto& t : threads) t.join();
  EXPECT_EQ(compiles.load(), 1);
  for (auto* g : got) EXPECT_EQ(g, got[0]);
  EXPECT_EQ(loader.stats().compiles.load(), 1);
  EXPECT_EQ(loader.stats().memory_hits.load(), 31);
}

TEST(Loader, CompileFailureIsRecordedOnceAndRethrown) {
  Fixture f;
  test::TempDir dump;
  std::atomic<int> calls{0};
  LoaderOptions o;
  o.dump_dir = dump.path();
  o.compile = [&](const RenderedProgram& p, const Arch& a, const std::vector<std::string>& opts) -> CompiledBinary {
    ++calls;
    throw CompileError("nvrtcCompileProgram: NVRTC_ERROR_COMPILATION", p.name, a.str(), p.source_hash, opts,
                       "error: something");
  };
  Loader loader(o);
  for (int i = 0; i < 3; ++i) {
    try {
      loader.binary(f.program, f.build);
      FAIL();
    } catch (const CompileError& e) {
      EXPECT_EQ(e.log(), "error: something");
      EXPECT_EQ(e.program(), "ew_add_f32_v1");
    }
  }
  EXPECT_EQ(calls.load(), 1);
  EXPECT_TRUE(std::filesystem::exists(dump.path() / "ew_add_f32_v1.sm_90a.cu"));
  EXPECT_TRUE(std::filesystem::exists(dump.path() / "smxx_elementwise.cuh"));
}

// A program with a stand-in that must compile: the call gets the stand-in (compiled now) and the
// program compiles on a background thread; once it is in, calls get it. With the program in
// the disk cache (a new process) or stand-ins off, the stand-in is never compiled.
TEST(Loader, StandInServesWhileTheProgramCompilesInTheBackground) {
  auto reg = Registry::load_default();
  const Program& full = *reg->program("gg_sm90_fwd_128x256_s4_r16_c1");
  const Program& quick = *reg->program(full.stand_in);
  const Build& full_build = *reg->build(full.name, kHopper);
  const Build& quick_build = *reg->build(quick.name, kHopper);
  test::TempDir dir;
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  std::vector<std::string> compiled;
  LoaderOptions o;
  o.cache_dir = dir.path();
  o.nvrtc_version = [] { return std::string("13.0"); };
  o.compile = [&](const RenderedProgram& p, const Arch&, const std::vector<std::string>&) {
    std::unique_lock lock(mu);
    compiled.push_back(p.name);
    if (p.name == full.name) cv.wait(lock, [&] { return release; });  // a slow compile
    return test::fake_binary(p);
  };
  {
    Loader loader(o);
    for (int i = 0; i < 3; ++i) {  // the program is still compiling: the stand-in serves
      ServedBinary s = loader.serve(full, full_build, &quick, &quick_build);
      EXPECT_TRUE(s.stand_in);
      EXPECT_EQ(s.build, &quick_build);
      EXPECT_NE(s.binary->cubin.find(quick.name), std::string::npos);
    }
    EXPECT_EQ(loader.stats().stand_ins.load(), 3);
    {
      std::lock_guard lock(mu);
      release = true;
    }
    cv.notify_all();
    loader.wait_background();
    ServedBinary s = loader.serve(full, full_build, &quick, &quick_build);
    EXPECT_FALSE(s.stand_in);
    EXPECT_EQ(s.build, &full_build);
    EXPECT_NE(s.binary->cubin.find("for " + full.name), std::string::npos);
    EXPECT_EQ(loader.stats().compiles.load(), 2);
  }
  std::sort(compiled.begin(), compiled.end());
  EXPECT_EQ(compiled, (std::vector<std::string>{full.name, quick.name}));
  {
    Loader next(o);  // a new process: the disk cache serves the program itself
    ServedBinary s = next.serve(full, full_build, &quick, &quick_build);
    EXPECT_FALSE(s.stand_in);
    EXPECT_EQ(s.binary->from, ServedFrom::disk);
    EXPECT_EQ(next.stats().stand_ins.load(), 0);
  }
  test::TempDir empty;
  o.cache_dir = empty.path();
  o.stand_ins = false;
  release = true;
  Loader off(o);
  ServedBinary s = off.serve(full, full_build, &quick, &quick_build);
  EXPECT_FALSE(s.stand_in);
  EXPECT_EQ(s.binary->from, ServedFrom::jit);
  EXPECT_EQ(compiled.size(), 3u);  // the program only
}

// The background compile fails: the stand-in keeps serving, and the failure is not retried.
// The stand-in fails: the call waits for the program itself.
TEST(Loader, StandInFailures) {
  auto reg = Registry::load_default();
  const Program& full = *reg->program("gg_sm90_dgrad_128x256_s4_r16_c1");
  const Program& quick = *reg->program(full.stand_in);
  const Build& fb = *reg->build(full.name, kHopper);
  const Build& qb = *reg->build(quick.name, kHopper);
  for (const std::string& failing : {full.name, quick.name}) {
    std::atomic<int> calls{0};
    LoaderOptions o;
    o.compile = [&](const RenderedProgram& p, const Arch& a, const std::vector<std::string>& opts) -> CompiledBinary {
      ++calls;
      if (p.name == failing)
        throw CompileError("nvrtcCompileProgram: NVRTC_ERROR_COMPILATION", p.name, a.str(), p.source_hash, opts, "error");
      return test::fake_binary(p);
    };
    Loader loader(o);
    ServedBinary first = loader.serve(full, fb, &quick, &qb);
    loader.wait_background();
    ServedBinary second = loader.serve(full, fb, &quick, &qb);
    if (failing == full.name) {
      EXPECT_TRUE(first.stand_in);
      EXPECT_TRUE(second.stand_in);
      // Nothing to swap to: a launch's swap stays empty (asked after the failure: no CUDA call).
      EXPECT_EQ(loader.swap_when_ready(full, fb, 0, nullptr, 0)->function.load(), nullptr);
      EXPECT_EQ(loader.stats().swaps.load(), 0);
    } else {
      EXPECT_FALSE(first.stand_in);
      EXPECT_EQ(first.build, &fb);
      EXPECT_FALSE(second.stand_in);
    }
    EXPECT_EQ(calls.load(), 2) << failing;  // each compiled (or failed) once
    EXPECT_EQ(loader.stats().failures.load(), 1) << failing;
  }
}

TEST(Loader, DiskCacheServesASecondLoader) {
  Fixture f;
  test::TempDir dir;
  std::atomic<int> compiles{0};
  LoaderOptions o;
  o.cache_dir = dir.path();
  o.nvrtc_version = [] { return std::string("13.0"); };
  o.compile = [&](const RenderedProgram& p, const Arch&, const std::vector<std::string>&) {
    ++compiles;
    return test::fake_binary(p);
  };
  Loader first(o);
  EXPECT_EQ(first.binary(f.program, f.build)->from, ServedFrom::jit);
  Loader second(o);  // a new process, as far as memory goes
  auto b = second.binary(f.program, f.build);
  EXPECT_EQ(b->from, ServedFrom::disk);
  EXPECT_EQ(compiles.load(), 1);
  o.nvrtc_version = [] { return std::string("13.1"); };  // another toolkit: another key
  Loader third(o);
  EXPECT_EQ(third.binary(f.program, f.build)->from, ServedFrom::jit);
}

// Forks n processes that each ask a fresh Loader on `cache` for f's build. Their compiler is
// fake: it appends the process id to `starts` and takes `compile_ms`. A child exits 0 when it
// got the cubin.
std::vector<pid_t> spawn_racers(int n, const Fixture& f, const std::filesystem::path& cache,
                                const std::filesystem::path& starts, int compile_ms) {
  std::vector<pid_t> kids;
  for (int i = 0; i < n; ++i) {
    pid_t pid = ::fork();
    if (pid < 0) break;
    if (pid == 0) {
      LoaderOptions o;
      o.cache_dir = cache;
      o.nvrtc_version = [] { return std::string("13.0"); };
      o.compile = [&](const RenderedProgram& p, const Arch&, const std::vector<std::string>&) {
        std::ofstream(starts, std::ios::app) << ::getpid() << "\n" << std::flush;
        std::this_thread::sleep_for(std::chrono::milliseconds(compile_ms));
        return test::fake_binary(p);
      };
      int rc = 0;
      try {
        Loader loader(o);
        rc = loader.binary(f.program, f.build)->cubin.find("fake cubin") == std::string::npos;
      } catch (...) {
        rc = 2;
      }
      ::_exit(rc);
    }
    kids.push_back(pid);
  }
  return kids;
}

TEST(Loader, RacingProcessesCompileOnce) {
  Fixture f;
  test::TempDir dir;
  auto counter = dir.path() / "compiles.log";
  std::vector<pid_t> kids = spawn_racers(8, f, dir.path() / "cache", counter, 200);
  ASSERT_EQ(kids.size(), 8u);
  for (pid_t k : kids) {
    int status = 0;
    ::waitpid(k, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  auto log = read_file(counter).value_or("");
  EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 1) << log;
}

TEST(Loader, AotIsUsedAndCheckedBeforeAnythingElse) {
  Fixture f;
  test::TempDir dir;
  std::string cubin = "\x7f" "ELF prebuilt";
  dir.write("aot/sm_90a/ew_add_f32_v1.cubin", cubin);
  AotManifest m(dir.path() / "aot");
  AotEntry e;
  e.program = "ew_add_f32_v1";
  e.arch = "sm_90a";
  e.source_hash = f.build.source_hash;
  e.toolkit = "13.0";
  e.file = "sm_90a/ew_add_f32_v1.cubin";
  e.sha256 = sha256_hex(cubin);
  e.size = cubin.size();
  e.lowered_names = {"_Zprebuilt"};
  m.put(e);
  std::atomic<int> compiles{0};
  LoaderOptions o;
  o.aot = &m;
  o.jit_enabled = false;
  o.compile = [&](const RenderedProgram& p, const Arch&, const std::vector<std::string>&) {
    ++compiles;
    return test::fake_binary(p);
  };
  {
    Loader loader(o);
    auto b = loader.binary(f.program, f.build);
    EXPECT_EQ(b->from, ServedFrom::aot);
    EXPECT_EQ(b->lowered_names[0], "_Zprebuilt");
  }
  // A damaged prebuilt cubin is not used: with JIT disabled that is an error naming why.
  dir.write("aot/sm_90a/ew_add_f32_v1.cubin", "\x7f" "ELF prebuilT");
  {
    Loader loader(o);
    try {
      loader.binary(f.program, f.build);
      FAIL();
    } catch (const Error& err) {
      EXPECT_NE(std::string(err.what()).find("JIT is disabled"), std::string::npos) << err.what();
    }
  }
  o.jit_enabled = true;
  Loader loader(o);
  EXPECT_EQ(loader.binary(f.program, f.build)->from, ServedFrom::jit);
  EXPECT_EQ(compiles.load(), 1);
}

}  // namespace
}  // namespace cake

namespace cake {
namespace {

TEST(DiskCache, FoldersArePrivateAndOthersWritableFoldersAreNotLoaded) {
  test::TempDir dir;
  DiskCache cache(dir.path() / "cache");
  std::string key(64, 'c');
  ASSERT_TRUE(cache.put(key, "prog", {"cubin", {"_Zk"}}));
  auto shard = cache.entry_path(key).parent_path();
  struct stat st {};
  ASSERT_EQ(::stat(shard.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 077, 0u) << std::oct << st.st_mode;
  ASSERT_TRUE(cache.get(key));
  ::chmod(shard.c_str(), 0777);  // anyone could plant a cubin here now
  EXPECT_FALSE(cache.get(key));
  EXPECT_TRUE(std::filesystem::exists(cache.entry_path(key)));  // refused, not deleted
  ::chmod(shard.c_str(), 0700);
  EXPECT_TRUE(cache.get(key));
}

TEST(DiskCache, TempFilesOfDeadWritersAreCleaned) {
  test::TempDir dir;
  DiskCache cache(dir.path());
  std::string key(64, 'b');
  ASSERT_TRUE(cache.put(key, "prog", {"cubin", {}}));
  auto entry = cache.entry_path(key);
  // A pid that cannot be alive (above pid_max) and this process's own.
  auto dead = entry.string() + ".tmp.2147483646.7", live = entry.string() + ".tmp." + std::to_string(::getpid()) + ".8";
  std::ofstream(dead) << "half a cubin";
  std::ofstream(live) << "being written";
  ASSERT_TRUE(cache.put(key, "prog", {"cubin2", {}}));
  EXPECT_FALSE(std::filesystem::exists(dead));
  EXPECT_TRUE(std::filesystem::exists(live));
}

// 8 processes race for one uncached build; the one that compiles is killed with SIGKILL in
// the middle of its compile. The others must not hang on its lock, one of them compiles,
// all of them finish, and no partial entry or temp file is left.
TEST(Loader, KillNineOfTheCompilingProcessLosesNothing) {
  Fixture f;
  test::TempDir dir;
  auto starts = dir.path() / "starts.log";
  std::vector<pid_t> kids = spawn_racers(8, f, dir.path() / "cache", starts, 800);
  ASSERT_EQ(kids.size(), 8u);
  // Wait for the first compile to start, then kill its process.
  pid_t victim = 0;
  for (int i = 0; i < 200 && victim == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    auto log = read_file(starts);
    if (log && !log->empty()) victim = pid_t(std::atol(log->c_str()));
  }
  ASSERT_NE(victim, 0);
  ASSERT_EQ(::kill(victim, SIGKILL), 0);
  int finished = 0;
  for (pid_t k : kids) {
    int status = 0;
    ::waitpid(k, &status, 0);
    if (k == victim) {
      EXPECT_TRUE(WIFSIGNALED(status));
      continue;
    }
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ++finished;
  }
  EXPECT_EQ(finished, 7);
  auto log = read_file(starts).value_or("");
  EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 2) << log;  // the victim and one successor
  int temps = 0, entries = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir.path() / "cache")) {
    std::string name = e.path().filename().string();
    temps += name.find(".tmp.") != std::string::npos;
    entries += e.path().extension() == ".cubin";
  }
  EXPECT_EQ(temps, 0);
  EXPECT_EQ(entries, 1);
}

}  // namespace
}  // namespace cake
