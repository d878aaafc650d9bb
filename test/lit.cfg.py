# lit configuration of the compiler tests (DESIGN.md §8).
import os

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "monarch"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.monarch_obj_root, "test")

# test/ also holds GoogleTest and pytest suites and CMake files: not lit's.
config.excludes = [
    "CMakeLists.txt",
    "LitSuite.cmake",
    "README.md",
    "lit.cfg.py",
    "lit.site.cfg.py",
    "lit.site.cfg.py.in",
    "runtime",
    "python",
    "e2e",
    "Inputs",
    "corpus",
]

config.substitutions.append(("%PATH%", config.environment["PATH"]))

llvm_config.with_system_environment(["HOME", "TMP", "TEMP"])
llvm_config.use_default_substitutions()

# monarch tools from build/bin; FileCheck, not, split-file from LLVM 22.
tool_dirs = [config.monarch_tools_dir, config.llvm_tools_dir]
llvm_config.add_tool_substitutions(["monarch-opt", "monarch-fuzz"], tool_dirs)
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.monarch_tools_dir, append_path=True)

if config.monarch_have_fuzzer and os.path.exists(
    os.path.join(config.monarch_tools_dir, "monarch-fuzz")
):
    config.available_features.add("fuzzer")

# monarch-run (tools/monarch-run) runs .mlir programs end to end on local worker
# processes: test/Integration needs it (and its worker binary beside it).
if os.path.exists(os.path.join(config.monarch_tools_dir, "monarch-run")):
    llvm_config.add_tool_substitutions(["monarch-run"], tool_dirs)
    config.available_features.add("monarch-run")

# monarch-opt linked statically (tools/monarch-opt/CMakeLists.txt), and the
# monarch-run built as without the compiler (tools/monarch-run/CMakeLists.txt),
# which compiles .mlir files by running it. Features when CMake configured the
# targets (a target that stopped building fails its tests instead of skipping
# them). `--param monarch-opt=PATH` (lit's own) runs the suite against another
# monarch-opt, e.g. the static one.
for tool, built in [
    ("monarch-opt-static", config.monarch_have_static_opt),
    ("monarch-run-nocompiler", config.monarch_have_run_nocompiler),
]:
    if built:
        llvm_config.add_tool_substitutions(
            [ToolSubst(tool, command=os.path.join(config.monarch_tools_dir, tool))]
        )
        config.available_features.add(tool)
