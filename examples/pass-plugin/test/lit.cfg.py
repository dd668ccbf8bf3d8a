import os

import lit.formats

config.name = "pin-sharding"
config.test_format = lit.formats.ShTest(True)
config.suffixes = [".mlir"]
config.test_source_root = os.path.dirname(__file__)
config.substitutions.append(("%loom-opt", config.loom_opt))
config.substitutions.append(("%plugin", config.plugin))
config.environment["PATH"] = os.pathsep.join(
    [config.llvm_tools_dir, config.environment.get("PATH", os.environ["PATH"])])
