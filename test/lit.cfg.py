# -*- Python -*-
import os

import subprocess

import lit.formats
from lit.llvm import llvm_config

config.name = "LOOM"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.loom_obj_root, "test")
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "loomtest.py", "opcheck.py", "gpt_torch.py", "bf16_round.py", "mixed_precision.py", "bf16_parity.py",
                   "check_training.py", "check_pmpi.py", "collectives.cpp", "unit.cpp",
                   "pmpi_count.c", "check_report.py", "check_overlap.py", "grad_accumulation.py", "parity.py", "__pycache__",
                   "compare_losses.py", "run-gpu-tests.sh", "check_fatbin.py", "check_safetensors.py", "start-slurm.sh", "stale_temporaries.py"]

# Every FileCheck variable is local to its CHECK-LABEL block.
config.environment["FILECHECK_OPTS"] = "--enable-var-scope"

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)

config.substitutions.append(("%loom_src", config.loom_src_root))
config.substitutions.append(("%loom_obj", config.loom_obj_root))
config.substitutions.append(("%python", config.python_executable))
config.substitutions.append(
    ("%loom-gen", config.python_executable + " " +
     os.path.join(config.loom_src_root, "tools", "loom-gen", "loom-gen.py")))

# mpirun as the tests use it: root in CI, more ranks than cores.
config.substitutions.append(
    ("%mpirun", "mpirun --allow-run-as-root --oversubscribe --bind-to none"))
# A launcher that ignores SIGTERM (mpirun cleaning up after a stopped rank
# on a loaded machine was seen to) is killed 10 s later: a test fails, the
# suite does not hang.
config.substitutions.append(("%timeout", "timeout -k 10"))
# The collective timeout of the tests that stall a rank on purpose: the
# stalled rank must stop within it after the others begin to wait, which
# under the sanitizers, with other ranks' tests beside it on two cores, took
# more than 3 s (the verdict then read "slow", not "does not answer").
config.substitutions.append(
    ("%stall_timeout", "10" if "ASAN_OPTIONS" in os.environ else "3"))
# Out-of-tree builds against an installed Loom (examples/pass-plugin).
config.substitutions.append(("%mlir_cmake_dir", config.mlir_cmake_dir))
config.substitutions.append(("%cmake", config.cmake_command))
config.substitutions.append(("%make_program", config.make_program))
# OpenMPI refuses to start inside an OpenMPI job; keep lit's environment
# free of one.
for var in list(config.environment):
    if var.startswith(("OMPI_", "PMIX_")):
        del config.environment[var]

tool_dirs = [os.path.join(config.loom_obj_root, "bin"), config.llvm_tools_dir]
llvm_config.add_tool_substitutions(
    ["loom-opt", "loomc", "loom-schedule", "loomrt-collectives-test",
     "loomrt-calibrate", "loomrt-unit-test"],
    tool_dirs)

# The cuda backend: `cuda-build` where it was built (nvcc, cuBLAS and NCCL
# found), `cuda-device` where a GPU is present too, `cuda-gpus-N` with at
# least N of them. Without a device the GPU tests are reported UNSUPPORTED,
# and why is printed here.
if config.loom_have_cuda in ("ON", "TRUE", "1"):
    config.available_features.add("cuda-build")
    probe = os.path.join(config.loom_obj_root, "bin", "loomrt-cuda-probe")
    try:
        result = subprocess.run([probe], capture_output=True, text=True, timeout=60)
        output, code = result.stdout.strip(), result.returncode
    except (OSError, subprocess.TimeoutExpired) as e:
        output, code = str(e), 1
    if code == 0:
        devices = output.count("device ")
        config.available_features.add("cuda-device")
        for n in (2, 4, 8):
            if devices >= n:
                config.available_features.add("cuda-gpus-%d" % n)
        lit_config.note("GPU tests run on: " + output.replace("\n", "; "))
    else:
        lit_config.note("GPU tests skipped: " + output)
else:
    lit_config.note("GPU tests skipped: Loom was built without the cuda backend")
llvm_config.add_tool_substitutions(
    ["loomrt-collectives-test-cuda", "loomrt-cuda-probe"], tool_dirs)

# Slurm: a one-node cluster of our own (munge, slurmctld, slurmd, started
# by test/slurm/start-slurm.sh under the build tree and stopped when lit
# ends) gives the feature `slurm`; where the packages or the daemons are
# missing, the Slurm tests are reported UNSUPPORTED and why is printed here.
import atexit
import shutil
slurm_dir = os.path.join(config.loom_obj_root, "test", "slurm-cluster")
if os.environ.get("LOOM_VERIFY_ROUNDTRIP") == "1":
    pass  # the --verify-roundtrip run covers loom-opt's suites only
elif shutil.which("slurmctld"):
    shutil.rmtree(slurm_dir, ignore_errors=True)
    try:
        started = subprocess.run(
            ["bash", os.path.join(config.loom_src_root, "test", "slurm",
                                  "start-slurm.sh"), slurm_dir],
            capture_output=True, text=True, timeout=120)
        code, why = started.returncode, (started.stdout + started.stderr).strip()
    except (OSError, subprocess.TimeoutExpired) as e:
        code, why = 1, str(e)

    def stop_slurm():
        for name in ("slurmd.pid", "slurmctld.pid", "munge.pid"):
            try:
                with open(os.path.join(slurm_dir, name)) as f:
                    os.kill(int(f.read().strip()), 15)
            except (OSError, ValueError):
                pass
    atexit.register(stop_slurm)
    if code == 0:
        config.available_features.add("slurm")
        config.environment["SLURM_CONF"] = os.path.join(slurm_dir, "slurm.conf")
        lit_config.note("Slurm tests run on a one-node cluster in " + slurm_dir)
    else:
        lit_config.note("Slurm tests skipped: " + why)
else:
    lit_config.note("Slurm tests skipped: slurm-wlm is not installed")

# `--verify-roundtrip` over the whole suite: LOOM_VERIFY_ROUNDTRIP=1 makes every
# loom-opt invocation also check that its output prints, parses and prints
# again identically (generic and custom forms).
if os.environ.get("LOOM_VERIFY_ROUNDTRIP") == "1":
    config.substitutions = [
        (pat, (sub + " --verify-roundtrip") if sub.endswith("loom-opt") else sub)
        for pat, sub in config.substitutions
    ]
