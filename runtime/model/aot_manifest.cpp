#include "aot_manifest.hpp"

#include <nlohmann/json.hpp>

#include "error.hpp"
#include "file_util.hpp"
#include "folder_trust.hpp"

namespace cake {
using nlohmann::json;

AotManifest AotManifest::read(const std::filesystem::path& dir) {
  AotManifest m(dir);
  std::error_code ec;
  if (!std::filesystem::exists(dir, ec)) return m;  // nothing to read, nothing to refuse
  FolderTrust t = check_folder_trust(dir);
  if (t.safe) t = check_file_trust(dir / "manifest.json");
  if (!t.safe) {
    m.refused_ = t.text();
    return m;
  }
  auto text = read_file(dir / "manifest.json");
  if (!text) return m;
  std::string where = (dir / "manifest.json").string();
  try {
    json doc = json::parse(*text);
    // Integers are checked as integers: converting an out-of-range double is undefined.
    if (!doc.is_object() || !doc.contains("format") || !doc["format"].is_number_integer() ||
        doc["format"].get<int64_t>() != kFormat)
      throw Error(where + ": unsupported manifest format " + (doc.is_object() ? doc.value("format", json()).dump() : "?"));
    for (const auto& e : doc.at("entries")) {
      AotEntry a;
      a.program = e.at("program").get<std::string>();
      a.arch = e.at("arch").get<std::string>();
      a.source_hash = e.at("source_hash").get<std::string>();
      a.toolkit = e.at("toolkit").get<std::string>();
      a.options = e.at("options").get<std::vector<std::string>>();
      a.file = e.at("file").get<std::string>();
      a.sha256 = e.at("sha256").get<std::string>();
      if (!e.at("size").is_number_unsigned()) throw Error(where + ": entry size is not a non-negative integer");
      a.size = e.at("size").get<uint64_t>();
      a.lowered_names = e.at("lowered_names").get<std::vector<std::string>>();
      // A manifest is input: an entry must not point outside its folder.
      if (a.file.empty() || a.file[0] == '/' || a.file.find("..") != std::string::npos)
        throw Error(where + ": entry " + a.key() + " has an unsafe file name '" + a.file + "'");
      m.entries_[a.key()] = std::move(a);
    }
  } catch (const json::exception& e) {
    throw Error(where + ": malformed manifest: " + e.what());
  }
  return m;
}

void AotManifest::write() const {
  json entries = json::array();
  for (const auto& [k, a] : entries_)
    entries.push_back({{"program", a.program},
                       {"arch", a.arch},
                       {"source_hash", a.source_hash},
                       {"toolkit", a.toolkit},
                       {"options", a.options},
                       {"file", a.file},
                       {"sha256", a.sha256},
                       {"size", a.size},
                       {"lowered_names", a.lowered_names}});
  json doc = {{"format", kFormat}, {"entries", entries}};
  std::filesystem::create_directories(dir_);
  write_file_atomic(dir_ / "manifest.json", doc.dump(2) + "\n");
}

const AotEntry* AotManifest::find(const std::string& program, const Arch& arch) const {
  auto it = entries_.find(program + "@" + arch.str());
  return it == entries_.end() ? nullptr : &it->second;
}

void AotManifest::put(AotEntry e) { entries_[e.key()] = std::move(e); }

bool AotManifest::has(const std::string& program, const Arch& arch,
                      const std::string& source_hash) const {
  const AotEntry* e = find(program, arch);
  if (e == nullptr || e->source_hash != source_hash) return false;
  std::error_code ec;
  return std::filesystem::is_regular_file(dir_ / e->file, ec);
}

}  // namespace cake
