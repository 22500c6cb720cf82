// Whether cake may load code from a folder: a cubin read from a folder that another user can
// change would run inside the training process. The rule is the one ssh and sudo apply to a
// path: the folder itself, and every folder above it up to the first that is owner-only or
// has the sticky bit, must be owned by this user or root and not writable by group or others
// (a sticky folder may be: nobody else can rename what is ours inside it).
#pragma once
#include <filesystem>
#include <string>

namespace cake {

struct FolderTrust {
  bool safe = true;
  std::string folder;  // the folder (or file) that makes it unsafe
  std::string why;     // "writable by others", "owned by uid 1234", ...
  std::string text() const { return safe ? "safe" : folder + " is " + why; }
};

// `dir` and the folders above it, checked both as written (a folder holding a symlink on the
// way counts) and with symlinks resolved. A folder that does not exist yet is judged by the
// nearest existing one above it, where it would be created.
FolderTrust check_folder_trust(const std::filesystem::path& dir);

// A folder cake writes itself (the cache's own v1/ and v1/xx/): this folder alone, whose
// parents the caller has checked.
FolderTrust check_own_folder(const std::filesystem::path& dir);

// A file cake reads code or hashes from (aot/manifest.json): owned by this user or root,
// not writable by group or others.
FolderTrust check_file_trust(const std::filesystem::path& file);

}  // namespace cake
