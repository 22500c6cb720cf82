// cake program ew_cast_acc_f32_bf16_v8 (template smxx_elementwise.cuh)
// kernel: cake::ew::cast_accumulate<float, cake::bf16, 8>
#include "smxx_elementwise.cuh"
