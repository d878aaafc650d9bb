//===- MonarchAttrs.td - Attributes of the monarch dialect -*- tablegen -*-===//
#ifndef MONARCH_ATTRS_TD
#define MONARCH_ATTRS_TD

include "monarch/Dialect/Monarch/IR/MonarchBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

class Monarch_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Monarch_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

// Reduction and adverb are plain I32 enum attributes: ops print them as bare
// keywords (`sum`, `rref`).
def Monarch_ReductionEnumAttr : I32EnumAttr<"ReductionKind", "reduction", [
    I32EnumAttrCase<"sum", 0>, I32EnumAttrCase<"avg", 1>,
    I32EnumAttrCase<"min", 2>, I32EnumAttrCase<"max", 3>,
    I32EnumAttrCase<"product", 4>, I32EnumAttrCase<"stack", 5>]> {
  let cppNamespace = "::monarch";
}

def Monarch_AdverbEnumAttr : I32EnumAttr<"AdverbKind", "endpoint adverb", [
    I32EnumAttrCase<"call", 0>, I32EnumAttrCase<"call_one", 1>,
    I32EnumAttrCase<"broadcast", 2>, I32EnumAttrCase<"choose", 3>,
    I32EnumAttrCase<"rref", 4>]> {
  let cppNamespace = "::monarch";
}

// torch.dtype (the c10::ScalarType names torch prints).
def Monarch_DType : I32EnumAttr<"DType", "torch dtype", [
    I32EnumAttrCase<"uint8", 0>, I32EnumAttrCase<"int8", 1>,
    I32EnumAttrCase<"int16", 2>, I32EnumAttrCase<"int32", 3>,
    I32EnumAttrCase<"int64", 4>, I32EnumAttrCase<"float16", 5>,
    I32EnumAttrCase<"float32", 6>, I32EnumAttrCase<"float64", 7>,
    I32EnumAttrCase<"complex32", 8>, I32EnumAttrCase<"complex64", 9>,
    I32EnumAttrCase<"complex128", 10>, I32EnumAttrCase<"Bool", 11, "bool">,
    I32EnumAttrCase<"bfloat16", 15>]> {
  let cppNamespace = "::monarch";
  let genSpecializedAttr = 0;
}
def Monarch_DTypeAttr : EnumAttr<Monarch_Dialect, Monarch_DType, "dtype"> {
  let summary = "a torch.dtype argument";
  let assemblyFormat = "`<` $value `>`";
}

// torch.layout.
def Monarch_TorchLayout : I32EnumAttr<"TorchLayout", "torch layout", [
    I32EnumAttrCase<"strided", 0>, I32EnumAttrCase<"sparse_coo", 1>,
    I32EnumAttrCase<"sparse_csr", 2>, I32EnumAttrCase<"mkldnn", 3>]> {
  let cppNamespace = "::monarch";
  let genSpecializedAttr = 0;
}
def Monarch_TorchLayoutAttr : EnumAttr<Monarch_Dialect, Monarch_TorchLayout, "layout"> {
  let summary = "a torch.layout argument";
  let assemblyFormat = "`<` $value `>`";
}

// torch.memory_format (c10::MemoryFormat numbering).
def Monarch_MemoryFormat : I32EnumAttr<"MemoryFormat", "torch memory format", [
    I32EnumAttrCase<"contiguous_format", 0>, I32EnumAttrCase<"preserve_format", 1>,
    I32EnumAttrCase<"channels_last", 2>, I32EnumAttrCase<"channels_last_3d", 3>]> {
  let cppNamespace = "::monarch";
  let genSpecializedAttr = 0;
}
def Monarch_MemoryFormatAttr
    : EnumAttr<Monarch_Dialect, Monarch_MemoryFormat, "memory_format"> {
  let summary = "a torch.memory_format argument";
  let assemblyFormat = "`<` $value `>`";
}

//===----------------------------------------------------------------------===//
// ATen argument attributes
//===----------------------------------------------------------------------===//

def Monarch_DeviceAttr : Monarch_Attr<"Device", "device"> {
  let summary = "a torch.device argument";
  let description = [{ `#monarch.device<"cuda:0">`, `#monarch.device<"cpu">`. }];
  let parameters = (ins "::mlir::StringAttr":$name);
  let assemblyFormat = "`<` $name `>`";
}

def Monarch_NoneAttr : Monarch_Attr<"None", "none"> {
  let summary = "Python None for an optional argument";
  let description = [{ `#monarch.none` }];
}

def Monarch_ScalarAttr : Monarch_Attr<"Scalar", "scalar"> {
  let summary = "an at::Scalar argument";
  let description = [{
    A number passed where the schema says `Scalar`: `#monarch.scalar<2 : i64>`,
    `#monarch.scalar<5.000000e-01 : f64>`, `#monarch.scalar<true>`.
  }];
  let parameters = (ins "::mlir::Attribute":$value);
  let assemblyFormat = "`<` $value `>`";
  let genVerifyDecl = 1;
}

def Monarch_OperandAttr : Monarch_Attr<"Operand", "operand"> {
  let summary = "placeholder for a tensor operand in an argument list";
  let description = [{
    In the `args` of `monarch.aten` / `monarch.call_function`,
    `#monarch.operand` stands for the next tensor operand. The custom syntax
    prints the operand itself in its place.
  }];
}

def Monarch_OperandListAttr : Monarch_Attr<"OperandList", "operand_list"> {
  let summary = "placeholder for a Tensor[] argument";
  let description = [{
    `#monarch.operand_list<3>` stands for a `Tensor[]` made of the next 3
    tensor operands; the custom syntax prints `[%a, %b, %c]`.
  }];
  let parameters = (ins "int64_t":$count);
  let assemblyFormat = "`<` $count `>`";
}

def Monarch_OptionalOperandListAttr
    : Monarch_Attr<"OptionalOperandList", "optional_operand_list"> {
  let summary = "placeholder for a Tensor?[] argument";
  let description = [{
    `#monarch.optional_operand_list<[true, false, true]>` stands for
    a `Tensor?[]` (e.g. the indices of `aten::index.Tensor`) whose present
    entries are the next tensor operands; the custom syntax prints
    `[%a, #monarch.none, %b]`.
  }];
  let parameters = (ins "::mlir::DenseBoolArrayAttr":$present);
  let assemblyFormat = "`<` $present `>`";
}

#endif // MONARCH_ATTRS_TD
