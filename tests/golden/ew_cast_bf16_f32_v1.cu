// cake program ew_cast_bf16_f32_v1 (template smxx_elementwise.cuh)
// kernel: cake::ew::cast<cake::bf16, float, 1>
#include "smxx_elementwise.cuh"
