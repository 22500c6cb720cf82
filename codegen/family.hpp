// Family specs: which parameter sets become programs, and the routes over them. Each family
// is C++ that returns data; `cakec render` turns all families into registry/*.json and
// build.json.
#pragma once
#include <nlohmann/json.hpp>

#include <algorithm>
#include <string>
#include <vector>

namespace cake::codegen {

struct ProgramSpec {
  std::string name;
  std::string templ;
  std::vector<std::string> kernels;
  std::vector<std::string> archs;
  nlohmann::json params = nlohmann::json::object();
  std::string min_cuda = "12.0";
  std::string stand_in;  // a program that serves while this one compiles (Program::stand_in)
};

struct FamilySpec {
  std::string name;
  std::vector<ProgramSpec> programs;
  nlohmann::json routes = nlohmann::json::array();
};

FamilySpec elementwise_family();
FamilySpec rmsnorm_family();
FamilySpec grouped_gemm_family();

// Every family, in the order their files are written.
std::vector<FamilySpec> all_families();

}  // namespace cake::codegen
