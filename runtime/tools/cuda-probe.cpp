//===- cuda-probe.cpp - is there a CUDA device here? -----------------------===//
//
// Prints the devices and exits 0 when at least one is usable; otherwise
// prints why not and exits 77 (the skip code of CTest and of the GPU tests).
//
//===----------------------------------------------------------------------===//

#include <cuda_runtime.h>

#include <cstdio>

int main() {
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    std::printf("no CUDA device: %s\n",
                status != cudaSuccess ? cudaGetErrorString(status)
                                      : "cudaGetDeviceCount found none");
    return 77;
  }
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, d) != cudaSuccess)
      continue;
    std::printf("device %d: %s, sm_%d%d, %.0f GiB\n", d, p.name, p.major,
                p.minor, double(p.totalGlobalMem) / double(1 << 30));
  }
  return 0;
}
