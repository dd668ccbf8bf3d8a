// Unit checks of the runtime's pure helpers, run by unit.test.
#include "Internal.h"

#include <cstdio>

using loomrt::chooseDevice;

static int failures = 0;
static void expect(bool ok, const char *what) {
  if (!ok) {
    std::printf("FAILED: %s\n", what);
    ++failures;
  }
}

int main() {
  // srun --gpus-per-task=1: each task sees one device, whatever its local
  // rank (every task but a node's first used to fail).
  expect(chooseDevice(1, 0) == 0, "one visible device, local rank 0");
  expect(chooseDevice(1, 3) == 0, "one visible device, local rank 3");
  // mpirun on a node of 8 GPUs: the local rank picks its device.
  expect(chooseDevice(8, 0) == 0, "8 devices, local rank 0");
  expect(chooseDevice(8, 5) == 5, "8 devices, local rank 5");
  // More ranks than devices on a node: refused.
  expect(chooseDevice(4, 4) == -1, "4 devices, local rank 4");
  expect(chooseDevice(2, 7) == -1, "2 devices, local rank 7");
  if (!failures)
    std::printf("unit: ok\n");
  return failures ? 1 : 0;
}
