"""monarch._tensor_worker: importing it (in a Python tensor worker process
only) registers the C++ TensorWorker actor and installs the resolver that
runs monarch.remote functions and the rref adverb in Python
(frontend/csrc/TensorWorker.cpp). It exports no names."""
