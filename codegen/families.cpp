#include "family.hpp"

namespace cake::codegen {

// Every family, in the order their files are written. A new family adds one line here.
std::vector<FamilySpec> all_families() { return {elementwise_family(), rmsnorm_family(), grouped_gemm_family()}; }

}  // namespace cake::codegen
