#include "folder_trust.hpp"

#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <vector>

namespace cake {
namespace fs = std::filesystem;

namespace {

bool trusted_owner(const struct stat& st) { return st.st_uid == ::geteuid() || st.st_uid == 0; }

// A user-private group (the user's own primary group, named after the user, no other
// members), as a umask of 002 gives every folder: its write bit lets no one else in.
bool private_group(gid_t gid) {
  if (gid != ::getegid()) return false;
  std::vector<char> buf(16384);
  struct passwd pw {}, *pwp = nullptr;
  struct group gr {}, *grp = nullptr;
  if (::getpwuid_r(::geteuid(), &pw, buf.data(), buf.size() / 2, &pwp) != 0 || !pwp) return false;
  if (::getgrgid_r(gid, &gr, buf.data() + buf.size() / 2, buf.size() / 2, &grp) != 0 || !grp) return false;
  return std::strcmp(pw.pw_name, gr.gr_name) == 0 && (gr.gr_mem == nullptr || gr.gr_mem[0] == nullptr);
}

bool group_can_write(const struct stat& st) { return (st.st_mode & S_IWGRP) && !private_group(st.st_gid); }

FolderTrust unsafe(const fs::path& p, std::string why) { return {false, p.string(), std::move(why)}; }

std::string owner_text(const struct stat& st) {
  return "owned by uid " + std::to_string(st.st_uid) + ", not by this user or root";
}

// The folder or file itself: a trusted owner and no write bit for group or others.
FolderTrust judge_self(const fs::path& p, const struct stat& st) {
  if (!trusted_owner(st)) return unsafe(p, owner_text(st));
  if (st.st_mode & S_IWOTH) return unsafe(p, "writable by others");
  if (group_can_write(st)) return unsafe(p, "writable by its group");
  return {};
}

// From `p` up to the root: the folder itself (when it exists), then each folder above it,
// until a sticky one (nobody else can rename what is ours in it). An owner-only folder does
// not end the walk: whoever can write the folder above it can swap it for one of their own.
// A symlink on the way must be ours or root's, since its owner can point it elsewhere.
FolderTrust walk(fs::path p) {
  bool self = true;
  for (;;) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) == 0 && S_ISLNK(st.st_mode) && !trusted_owner(st))
      return unsafe(p, "a symlink " + owner_text(st));
    if (::stat(p.c_str(), &st) == 0) {
      if (self) {
        if (FolderTrust t = judge_self(p, st); !t.safe) return t;
      } else {
        if (!trusted_owner(st)) return unsafe(p, owner_text(st));
        if (st.st_mode & S_ISVTX) return {};
        if (st.st_mode & S_IWOTH) return unsafe(p, "writable by others (no sticky bit)");
        if (group_can_write(st)) return unsafe(p, "writable by its group (no sticky bit)");
      }
    }
    // A folder that does not exist yet would be created in the nearest one that does.
    self = false;
    const fs::path up = p.parent_path();
    if (up == p || up.empty()) return {};
    p = up;
  }
}

}  // namespace

FolderTrust check_folder_trust(const fs::path& dir) {
  std::error_code ec;
  // As written (no lexical ".." folding: after a symlink the kernel resolves ".." in the
  // link's target, and so does stat on each prefix), then with every link resolved.
  fs::path written = fs::absolute(dir, ec);
  if (ec) return unsafe(dir, "not resolvable: " + ec.message());
  if (!written.has_filename() && written.has_parent_path() && written != written.root_path())
    written = written.parent_path();  // "a/b/" -> "a/b"
  // The real folders first (their names are the ones to fix), then the path as written.
  fs::path real = fs::weakly_canonical(written, ec);
  if (!ec && real != written)
    if (FolderTrust t = walk(real); !t.safe) return t;
  return walk(written);
}

FolderTrust check_own_folder(const fs::path& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return {};
  return judge_self(dir, st);
}

FolderTrust check_file_trust(const fs::path& file) {
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0) return {};
  return judge_self(file, st);
}

}  // namespace cake
