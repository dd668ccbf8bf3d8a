#!/usr/bin/env bash
# Installs what Loom needs on Debian bookworm (LLVM/MLIR 22 from Debian's
# security suite, OpenMPI, OpenBLAS, nlohmann-json (the runtime's JSON
# library), the build tools, and Slurm with munge
# for the launch tests, which start a one-node cluster of their own).
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi
PACKAGES=(cmake ninja-build g++ python3
          llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools
          libopenmpi-dev openmpi-bin libopenblas-dev nlohmann-json3-dev
          python3-numpy python3-torch wamerican
          slurm-wlm munge)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
