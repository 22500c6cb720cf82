// The registry's JSON values, read and checked: names, archs and arch patterns, dtypes,
// ranges, windows, string lists; and a registry file's text. Each complaint names the file
// and the JSON pointer (RegistryError).
#pragma once
#include <string>
#include <vector>

#include "json_reader.hpp"
#include "registry.hpp"

namespace cake {

// Names become file names in caches and aot/: letters, digits, '_', '.', '-'; at most 128.
void check_name(const JsonReader& r, const std::string& s);
Arch read_arch(const JsonReader& r);                 // a build's arch, virtual ones included
ArchPattern read_arch_pattern(const JsonReader& r);  // a window's: "sm_90a", "sm_80+"
DType read_dtype(const JsonReader& r);
Range read_range(const JsonReader& r);               // [lo, hi], hi null for no bound
Window read_window(const JsonReader& r);
std::vector<std::string> read_strings(const JsonReader& r);
std::string read_file_text(const std::string& path);

}  // namespace cake
