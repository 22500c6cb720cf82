// Which folders cake loads code from: a fake home with folders of each mode, the disk cache
// and aot/ refusing what another user could change, and `cakec doctor` naming the folder.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "availability.hpp"
#include "disk_cache.hpp"
#include "fixtures.hpp"
#include "folder_trust.hpp"
#include "test_util.hpp"

namespace cake {
namespace {
namespace fs = std::filesystem;

constexpr uid_t kOtherUid = 65534;  // nobody
constexpr gid_t kOtherGid = 65534;  // nogroup

// A fake home under the test's temp folder (which sits in a sticky /tmp): folders made with
// the given modes, outermost first.
struct FakeHome {
  FakeHome() { fs::permissions(tmp.path(), fs::perms::owner_all); }  // whatever the umask
  test::TempDir tmp;
  fs::path make(const std::string& rel, mode_t mode) const {
    fs::path p = tmp.path() / rel;
    fs::create_directories(p);
    EXPECT_EQ(::chmod(p.c_str(), mode), 0) << p;
    return p;
  }
};

TEST(FolderTrust, OwnFolderOfTheUserIsSafe) {
  FakeHome h;
  fs::path home = h.make("home", 0755);
  EXPECT_TRUE(check_folder_trust(h.make("home/cache", 0700)).safe);
  EXPECT_TRUE(check_folder_trust(home / "cache/").safe);  // a trailing slash is the same folder
}

TEST(FolderTrust, FolderWritableByOthersIsNamed) {
  FakeHome h;
  h.make("home", 0755);
  fs::path cache = h.make("home/cache", 0777);
  FolderTrust t = check_folder_trust(cache);
  EXPECT_FALSE(t.safe);
  EXPECT_EQ(t.folder, cache.string());
  EXPECT_EQ(t.why, "writable by others");
  EXPECT_NE(t.text().find(cache.string() + " is writable by others"), std::string::npos) << t.text();
  // Sticky or not: others could have made the entries inside it first.
  ::chmod(cache.c_str(), 01777);
  EXPECT_FALSE(check_folder_trust(cache).safe);
}

TEST(FolderTrust, FolderAboveWritableByOthersWithoutStickyBitIsNamed) {
  FakeHome h;
  fs::path shared = h.make("shared", 0777);
  h.make("shared/me", 0755);
  fs::path cache = h.make("shared/me/cache", 0700);
  FolderTrust t = check_folder_trust(cache);
  EXPECT_FALSE(t.safe);
  EXPECT_EQ(t.folder, shared.string());
  EXPECT_EQ(t.why, "writable by others (no sticky bit)");
  // With the sticky bit nobody else can rename shared/me: the walk stops there.
  ::chmod(shared.c_str(), 01777);
  EXPECT_TRUE(check_folder_trust(cache).safe) << check_folder_trust(cache).text();
}

TEST(FolderTrust, AnOwnerOnlyFolderDoesNotEndTheWalk) {
  FakeHome h;
  fs::path open = h.make("open", 0777);
  h.make("open/home", 0700);  // whoever can write open/ can swap home/ for a folder of theirs
  FolderTrust t = check_folder_trust(h.make("open/home/cache", 0755));
  EXPECT_FALSE(t.safe);
  EXPECT_EQ(t.folder, open.string());
  // The folder itself is always judged.
  ::chmod(open.c_str(), 01777);
  EXPECT_TRUE(check_folder_trust(open / "home/cache").safe);
  EXPECT_FALSE(check_folder_trust(h.make("open/home/bad", 0757)).safe);
}

TEST(FolderTrust, DotDotAfterASymlinkIsJudgedWhereTheKernelGoes) {
  FakeHome h;
  fs::path mine = h.make("mine", 0755), open = h.make("open", 0777);
  h.make("open/x", 0755);
  fs::path c = h.make("open/c", 0700);
  fs::create_directory_symlink(open / "x", mine / "lnk");
  h.make("mine/c", 0700);  // what folding "lnk/.." lexically would wrongly check
  FolderTrust t = check_folder_trust(mine / "lnk/../c");  // the kernel opens open/c
  EXPECT_FALSE(t.safe);
  EXPECT_EQ(t.folder, open.string());
  (void)c;
}

TEST(FolderTrust, FolderNotYetCreatedIsJudgedWhereItWouldBe) {
  FakeHome h;
  fs::path open = h.make("open", 0777);
  FolderTrust t = check_folder_trust(open / "cache" / "sub");
  EXPECT_FALSE(t.safe);
  EXPECT_EQ(t.folder, open.string());
  EXPECT_TRUE(check_folder_trust(h.make("mine", 0755) / "cache").safe);
}

TEST(FolderTrust, SymlinkInAFolderOthersCanWriteIsNamed) {
  FakeHome h;
  fs::path open = h.make("open", 0777), real = h.make("real", 0700);
  fs::create_directory_symlink(real, open / "link");
  FolderTrust t = check_folder_trust(open / "link");
  EXPECT_FALSE(t.safe);
  EXPECT_EQ(t.folder, open.string());
  // And a safe link to an unsafe target: the target is judged too.
  fs::path mine = h.make("mine", 0755), bad = h.make("bad", 0777);
  fs::create_directory_symlink(bad, mine / "link");
  EXPECT_EQ(check_folder_trust(mine / "link").folder, bad.string());
}

TEST(FolderTrust, OtherOwnersAndGroupsNeedRoot) {
  if (::geteuid() != 0) GTEST_SKIP() << "chown to another user needs root";
  FakeHome h;
  h.make("home", 0755);
  fs::path theirs = h.make("home/theirs", 0700);
  ASSERT_EQ(::chown(theirs.c_str(), kOtherUid, kOtherGid), 0);
  FolderTrust t = check_folder_trust(theirs);
  EXPECT_FALSE(t.safe);
  EXPECT_EQ(t.why, "owned by uid 65534, not by this user or root");
  // Above the folder too.
  fs::path under = h.make("home/theirs/cache", 0700);
  EXPECT_EQ(check_folder_trust(under).folder, theirs.string());
  // Writable by a group other than the user's private one.
  fs::path grp = h.make("home/grp", 0770);
  ASSERT_EQ(::chown(grp.c_str(), ::geteuid(), kOtherGid), 0);
  t = check_folder_trust(grp);
  EXPECT_FALSE(t.safe);
  EXPECT_EQ(t.why, "writable by its group");
  // A symlink someone else owns: they can point it anywhere later, sticky folder or not.
  fs::path sticky = h.make("sticky", 01777), mine = h.make("mine", 0700);
  fs::create_directory_symlink(mine, sticky / "link");
  ASSERT_EQ(::lchown((sticky / "link").c_str(), kOtherUid, kOtherGid), 0);
  t = check_folder_trust(sticky / "link");
  EXPECT_FALSE(t.safe);
  EXPECT_EQ(t.folder, (sticky / "link").string());
  EXPECT_EQ(t.why, "a symlink owned by uid 65534, not by this user or root");
  // A file, likewise.
  fs::path f = h.tmp.write("home/manifest.json", "{}");
  ASSERT_EQ(::chown(f.c_str(), kOtherUid, kOtherGid), 0);
  EXPECT_FALSE(check_file_trust(f).safe);
}

TEST(FolderTrust, DiskCacheInAnUnsafeFolderIsNeitherReadNorWritten) {
  FakeHome h;
  fs::path root = h.make("cache", 0700);
  DiskCache cache(root);
  const std::string key(64, 'd');
  ASSERT_TRUE(cache.put(key, "prog", {"cubin", {"_Zk"}}));
  ASSERT_TRUE(cache.get(key));
  EXPECT_TRUE(cache.trust().safe);
  ::chmod(root.c_str(), 0777);  // the root, not only the entry's folders
  EXPECT_FALSE(cache.trust().safe);
  EXPECT_EQ(cache.trust().folder, root.string());
  EXPECT_FALSE(cache.get(key));
  EXPECT_TRUE(fs::exists(cache.entry_path(key)));  // refused, not deleted
  EXPECT_FALSE(cache.put(std::string(64, 'e'), "prog", {"cubin", {}}));
  EXPECT_FALSE(fs::exists(cache.entry_path(std::string(64, 'e'))));
  ::chmod(root.c_str(), 0700);
  // The cache's own v1/ folder too.
  fs::path v1 = root / "v1";
  ::chmod(v1.c_str(), 0777);
  EXPECT_EQ(cache.trust().folder, v1.string());
  EXPECT_FALSE(cache.get(key));
  ::chmod(v1.c_str(), 0700);
  EXPECT_TRUE(cache.get(key));
  // And an entry's folder, which the whole-cache check (cakec doctor) finds too.
  fs::path shard = cache.entry_path(key).parent_path();
  ::chmod(shard.c_str(), 0777);
  EXPECT_FALSE(cache.get(key));
  EXPECT_EQ(cache.trust().folder, shard.string());
  ::chmod(shard.c_str(), 0700);
}

// The aot fixture of test_availability: p1@sm_90a in a manifest.
fs::path write_aot(const test::TempDir& dir) {
  dir.write("aot/sm_90a/p1.cubin", "not really a cubin");
  AotManifest m(dir.path() / "aot");
  AotEntry e;
  e.program = "p1";
  e.arch = "sm_90a";
  e.source_hash = "h";
  e.toolkit = "99.0";
  e.file = "sm_90a/p1.cubin";
  e.sha256 = std::string(64, '0');
  e.size = 18;
  m.put(e);
  m.write();
  return dir.path() / "aot";
}

TEST(FolderTrust, AotFolderOrManifestOthersCanWriteIsNotRead) {
  test::TempDir dir;
  fs::permissions(dir.path(), fs::perms::owner_all);
  // A folder that is not there is an empty manifest, not a refused one.
  EXPECT_TRUE(AotManifest::read(dir.path() / "nothing").refused().empty());
  fs::path aot = write_aot(dir);
  EXPECT_EQ(AotManifest::read(aot).entries().size(), 1u);
  EXPECT_TRUE(AotManifest::read(aot).refused().empty());
  ::chmod(aot.c_str(), 0777);
  AotManifest m = AotManifest::read(aot);
  EXPECT_TRUE(m.entries().empty());
  EXPECT_EQ(m.refused(), aot.string() + " is writable by others");
  ::chmod(aot.c_str(), 0755);
  ::chmod((aot / "manifest.json").c_str(), 0666);
  EXPECT_EQ(AotManifest::read(aot).refused(), (aot / "manifest.json").string() + " is writable by others");
}

TEST(FolderTrust, RefusedAotIsTheReasonWhenNothingElseServes) {
  test::TempDir dir;
  fs::permissions(dir.path(), fs::perms::owner_all);
  fs::path aot = write_aot(dir);
  ::chmod(aot.c_str(), 0777);
  const AotManifest m = AotManifest::read(aot);
  auto reg = Registry::from_sources({{"fx.json", test::fixture_registry().dump()}});
  AvailabilityRule offline(*reg, &m, NvrtcInfo{}, /*jit_enabled=*/false);
  Availability a = offline.check(*reg->program("p1"), *Arch::parse("sm_90a"));
  EXPECT_FALSE(a.available());
  EXPECT_EQ(a.reason, "unsafe_aot");
  EXPECT_NE(a.detail.find(aot.string() + " is writable by others"), std::string::npos) << a.detail;
}

const std::string kCakec = CAKEC_PATH;

TEST(FolderTrust, DoctorNamesTheUnsafeFolder) {
  FakeHome h;
  fs::path cache = h.make("cache", 0777);
  test::RunResult r = test::run("CAKE_CACHE_DIR=" + cache.string() + " " + kCakec + " doctor");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("UNSAFE, not used: " + cache.string() + " is writable by others"), std::string::npos) << r.out;
  r = test::run("CAKE_CACHE_DIR=" + cache.string() + " " + kCakec + " doctor --strict --arch sm_90a");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("unsafe: cache " + cache.string() + ": " + cache.string() + " is writable by others"),
            std::string::npos)
      << r.out;
  // aot/ as well, with the folder that makes it unsafe.
  fs::path open = h.make("open", 0777);
  fs::path aot = h.make("open/aot", 0755);
  r = test::run("CAKE_CACHE_DIR=" + h.make("mine", 0700).string() + " " + kCakec + " --aot " + aot.string() +
                " doctor --strict --arch sm_90a");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("unsafe: aot " + aot.string() + ": " + open.string() + " is writable by others (no sticky bit)"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("unsafe: cache"), std::string::npos) << r.out;
  // An entry folder of the cache another user can write.
  fs::path mine = h.make("cache2", 0700);
  fs::path shard = h.make("cache2/v1/ab", 0777);
  ::chmod((mine / "v1").c_str(), 0700);
  r = test::run("CAKE_CACHE_DIR=" + mine.string() + " " + kCakec + " doctor --strict --arch sm_90a");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find(shard.string() + " is writable by others"), std::string::npos) << r.out;
}

TEST(FolderTrust, DoctorNamesTheCompileWorker) {
  test::RunResult r = test::run(kCakec + " doctor");
  EXPECT_NE(r.out.find("worker    " + fs::weakly_canonical(fs::path(kCakec).parent_path() /
                                                            "../runtime/cake_compile_worker")
                                          .string() +
                       " (compiles run in a child process)"),
            std::string::npos)
      << r.out;
}

}  // namespace
}  // namespace cake
