//===- TracePasses.td - Traced programs and the dialect ------*- tablegen -*-===//

#ifndef MONARCH_COMPILER_IMPORT_TRACEPASSES_TD
#define MONARCH_COMPILER_IMPORT_TRACEPASSES_TD

include "mlir/Pass/PassBase.td"

def MonarchEmitTrace : Pass<"monarch-emit-trace", "::mlir::ModuleOp"> {
  let summary = "write the program as a traced program (the import's input)";
  let description = [{
    The inverse of importing a trace (ImportTrace.h): writes the
    `monarch.plan.TracedProgram` whose import lowers to the same plan as
    this module. It is the plan lowering (`monarch::lowerToPlan`, so
    `entry` chooses the function the same way) plus what the import needs
    beyond a plan: the local type of every ref and, for each mesh made by
    `rename`/`split`/`slice`/`flatten`, its derivation (`mesh_origins`;
    views that no instruction runs on are added to the plan's meshes for
    the purpose). It exists to test the import on real programs:

    ```
    monarch-opt prog.mlir --monarch-emit-trace=output=prog.trace -o /dev/null
    monarch-opt prog.trace --monarch-emit-plan=output=b.plan   # == prog.mlir's plan
    ```

    The IR is not modified. Programs the plan lowering refuses, or whose
    plan has recordings (loops, calls), which the import does not read yet,
    fail the pass with a diagnostic.
  }];
  let options = [
    Option<"output", "output", "std::string", /*default=*/"\"-\"",
           "file to write the trace to ('-' for stdout)">,
    Option<"entry", "entry", "std::string", /*default=*/"\"\"",
           "entry function (default: 'main', or the module's only function)">,
    Option<"format", "format", "std::string", /*default=*/"\"binary\"",
           "'binary' (protobuf, a .trace) or 'text' (protobuf text format, "
           "a .trace.txt)">,
  ];
}

#endif // MONARCH_COMPILER_IMPORT_TRACEPASSES_TD
