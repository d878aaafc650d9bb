//===- LoweringPasses.td - Lowering of the monarch dialect ---*- tablegen -*-===//

#ifndef MONARCH_COMPILER_LOWERING_PASSES_TD
#define MONARCH_COMPILER_LOWERING_PASSES_TD

include "mlir/Pass/PassBase.td"

def MonarchEmitPlan : Pass<"monarch-emit-plan", "::mlir::ModuleOp"> {
  let summary = "lower the program to the executable plan and write it";
  let description = [{
    Lowers the entry function (and everything it calls) to the plan of
    docs/plan.md with `monarch::lowerToPlan` and writes it to `output`:
    the binary protobuf (`format=binary`, the `.plan` file the runtime
    loads) or the readable text dump (`format=text`, FileCheck-friendly).
    The IR is not modified. Unsupported IR fails the pass with a diagnostic
    naming the op.

    ```
    monarch-opt prog.mlir --monarch-emit-plan="output=prog.plan entry=main" -o /dev/null
    monarch-opt prog.mlir --monarch-emit-plan="format=text" -o /dev/null
    ```
  }];
  let options = [
    Option<"output", "output", "std::string", /*default=*/"\"-\"",
           "file to write the plan to ('-' for stdout)">,
    Option<"entry", "entry", "std::string", /*default=*/"\"\"",
           "entry function (default: 'main', or the module's only function)">,
    Option<"format", "format", "std::string", /*default=*/"\"binary\"",
           "'binary' (protobuf) or 'text' (readable dump)">,
  ];
}

#endif // MONARCH_COMPILER_LOWERING_PASSES_TD
