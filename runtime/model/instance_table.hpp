// Instances of parametric programs. A program whose kernels name problem dims ("{h}") stands
// for one program per value; an instance is that program made concrete: its name says the
// values (`p.h4096`), its kernels and params hold them, and it has a build per arch of
// the parametric program whose source hash derives from that build's hash and the instance's
// name. From there the loader, the disk cache and aot/ treat it as any declared program.
#pragma once
#include <map>
#include <memory>
#include <shared_mutex>
#include <string>
#include <string_view>

#include "json_reader.hpp"
#include "registry.hpp"

namespace cake {

// `<program>.<dim><value>...`, dims in name order: "p.h4096".
std::string instance_name(const Program& parametric, const std::map<std::string, int64_t>& values);
// The instance build's source hash: its parametric build's hash covers the template, its
// headers and the kernels' names with the placeholders, and the name adds the values.
std::string instance_source_hash(const std::string& parametric_hash, const std::string& instance_name);
// Why the problem's dims have no instance of `parametric` (a dim missing, out of range, not a
// multiple), or empty.
std::string instance_domain_error(const Program& parametric, const std::map<std::string, int64_t>& dims);
// The placeholders "{name}" in a kernel's name expression.
std::vector<std::string> kernel_placeholders(const std::string& kernel);

// Reads a program's "instance" member ({"dims": {"h": {"range": [lo, hi], "divisible": 8}},
// "prebuild": [{"h": 4096}, ...]}) into `p`.
void read_instance(const JsonReader& r, Program& p);
// The load-time checks of a program's placeholders and domain, given every declared program
// by name: a parametric program's kernels name each of its dims and no other, its params do
// not set them, its prebuild values lie in its domain, and no declared program takes a name
// of its instances; a program that is not parametric names no placeholder.
void check_instance_rules(const Program& p, const std::map<std::string_view, const Program*>& programs);

class InstanceTable {
 public:
  // The instance for `dims` (made on the first ask, then the same pointer); null with `*why`
  // when the dims are outside the program's domain. Thread-safe.
  const Program* get(const Registry& registry, const Program& parametric,
                     const std::map<std::string, int64_t>& dims, std::string* why);
  const Program* find_program(const std::string& name) const;
  const Build* find_build(const std::string& key) const;

 private:
  struct Entry {
    Program program;
    std::vector<std::unique_ptr<Build>> builds;
  };
  mutable std::shared_mutex mu_;
  std::map<std::string, std::unique_ptr<Entry>> programs_;
  std::map<std::string, const Build*> builds_;  // by build key, into programs_' entries
};

}  // namespace cake
