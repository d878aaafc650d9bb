"""Parses monarch-run's stdout: one line per fetched value, in program order,

  fetch #15 rank 3 (host=1, gpu=1): tensor<4x4xf32> [[5.83423, 4.94337], ...]
  fetch #9 rank 1 (gpu=1): error: instruction #7 (at LOC) failed on rank 1: MSG

into Fetch records (values as nested Python lists; errors as text)."""
import ast
import re
from dataclasses import dataclass

LINE = re.compile(
    r"^fetch #(?P<id>\d+) rank (?P<rank>\d+) \((?P<coords>[^)]*)\): "
    r"(?:error: (?P<error>.*)|tensor<(?P<type>[^>]*)> (?P<value>.*))$"
)


@dataclass
class Fetch:
    instruction: int
    rank: int
    coords: str
    shape: tuple = ()
    dtype: str = ""
    value: object = None  # nested lists of numbers, or a number for 0-d
    error: str = ""


def parse_value(text):
    text = text.replace("true", "True").replace("false", "False")
    text = re.sub(r"\binf\b", "float('inf')", text)
    text = re.sub(r"\bnan\b", "float('nan')", text)
    if "float(" in text:
        return eval(text, {"__builtins__": {"float": float}})
    return ast.literal_eval(text)


def parse(text):
    fetches = []
    for line in text.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        f = Fetch(int(m["id"]), int(m["rank"]), m["coords"])
        if m["error"] is not None:
            f.error = m["error"]
        else:
            parts = m["type"].split("x")
            f.dtype = parts[-1]
            f.shape = tuple(int(p) for p in parts[:-1])
            if "..." in m["value"]:
                raise ValueError(f"value cut by monarch-run (too many elements): {line[:80]}")
            f.value = parse_value(m["value"])
        fetches.append(f)
    return fetches
