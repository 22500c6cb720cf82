// cake program ew_add_f32_v4 (template smxx_elementwise.cuh)
// kernel: cake::ew::add<float, float, float, 4>
#include "smxx_elementwise.cuh"
