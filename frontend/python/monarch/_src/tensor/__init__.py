"""Distributed tensors driven by plain torch calls (docs/python.md,
"Distributed tensors"): capture at the ATen level, sessions of instructions
to the tensor workers, tracing to the monarch MLIR dialect. Imports torch."""
