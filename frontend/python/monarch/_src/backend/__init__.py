"""How the tensor frontend reaches workers: a small protocol of ids and bytes
(serialized ``monarch.plan`` messages), implemented by the C++ controller
(``monarch._C``, worker processes) and by the in-process simulation (``sim``).
"""
