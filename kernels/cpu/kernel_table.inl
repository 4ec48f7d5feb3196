// The kernel table of one ISA: head_dim 64, 128, 256 x KV dtype f32, f16, bf16.
//
// Included by each ISA translation unit after its target-attribute region ends and inside
// its namespace, so that kernel_set() itself is compiled for the baseline target: it only
// returns pointers and may be called on any CPU.

template <int D>
KernelSet kernels_for_dim(DType kv_dtype) {
  switch (kv_dtype) {
    case DType::f32:
      return {&attend<D, float>, &dist2<D, float>, &sketch_dot<D>, &dist2_some<D, float>};
    case DType::f16:
      return {&attend<D, f16_t>, &dist2<D, f16_t>, &sketch_dot<D>, &dist2_some<D, f16_t>};
    case DType::bf16:
      return {&attend<D, bf16_t>, &dist2<D, bf16_t>, &sketch_dot<D>, &dist2_some<D, bf16_t>};
  }
  return {};
}

KernelSet kernel_set(int head_dim, DType kv_dtype) {
  switch (head_dim) {
    case 64:
      return kernels_for_dim<64>(kv_dtype);
    case 128:
      return kernels_for_dim<128>(kv_dtype);
    case 256:
      return kernels_for_dim<256>(kv_dtype);
  }
  return {};
}
