// cakec cache list|clear: the JIT disk cache.
#include <iostream>

#include "cli_common.hpp"
#include "disk_cache.hpp"
#include "env.hpp"

namespace cakec {

void add_cache_command(CLI::App& app, Globals&, int& exit_code) {
  auto* cache = app.add_subcommand("cache", "The JIT disk cache ($CAKE_CACHE_DIR)");
  cache->require_subcommand(1);
  auto* list = cache->add_subcommand("list", "Entries: key, program, size");
  list->callback([&exit_code] {
    cake::DiskCache c(cake::env::cache_dir());
    std::vector<std::vector<std::string>> rows;
    uint64_t total = 0;
    for (const auto& e : c.list()) {
      rows.push_back({e.key.substr(0, 16), e.program, std::to_string(e.bytes)});
      total += e.bytes;
    }
    std::cout << "cache " << c.dir().string() << "\n" << format_table({"KEY", "PROGRAM", "BYTES"}, rows);
    std::cout << rows.size() << " entries, " << total << " bytes\n";
    exit_code = kOk;
  });
  auto* clear = cache->add_subcommand("clear", "Remove every entry");
  clear->callback([&exit_code] {
    cake::DiskCache c(cake::env::cache_dir());
    std::cout << "removed " << c.clear() << " entries from " << c.dir().string() << "\n";
    exit_code = kOk;
  });
}

}  // namespace cakec
