// An installed cake's C++ API: create a Runtime and print the plan of one problem.
//   consumer ARCH SMS OP [DIM=VALUE ...]      e.g. consumer sm_90a 132 <family>.<op> t=4096
// Exit 0: a route was chosen; 1: none (the plan says why); 2: an error.
#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>

#include "ops.hpp"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::cerr << "usage: consumer ARCH SMS OP [DIM=VALUE ...]\n";
    return 2;
  }
  try {
    auto arch = cake::Arch::parse(argv[1]);
    if (!arch) throw cake::Error(std::string("not an arch: ") + argv[1]);
    const cake::Device device{*arch, std::atoi(argv[2])};
    cake::Problem problem;
    problem.op = argv[3];
    for (int i = 4; i < argc; ++i) {
      const std::string kv = argv[i];
      const auto eq = kv.find('=');
      if (eq == std::string::npos) throw cake::Error("not DIM=VALUE: " + kv);
      problem.dims[kv.substr(0, eq)] = std::stoll(kv.substr(eq + 1));
    }
    cake::ops::complete_problem(problem);
    cake::Runtime rt;
    const cake::PlanResult& result = rt.plan(problem, device);
    std::cout << cake::format_plan(result, problem, device);
    return result.ok() ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "consumer: " << e.what() << "\n";
    return 2;
  }
}
