"""Python actors on the C++ runtime (docs/python.md, "Actors"). Imports
neither torch nor the tensor frontend: actor worker processes import it."""
