# Finds the Python interpreter and pybind11 that the extensions of the
# frontend (monarch._C, monarch._actors, monarch._rdma, monarch._tensor_worker)
# are built for (docs/building.md, "Python").
#
#   include(FindMonarchPython)
#   monarch_find_python()   # sets Python3_FOUND, Python3_EXECUTABLE,
#                           # pybind11_FOUND, MONARCH_PYTHON_PROBLEM
#
# Which interpreter: -DPython3_EXECUTABLE=... when given; otherwise the first
# of `python3` on PATH and /usr/bin/python3 whose `import torch` loads the
# libtorch this build links (MONARCH_TORCH_LIBRARY_DIR, set by runtime/tensor).
# An extension built for another interpreter would load a second libtorch
# into the process: on a GPU machine the user's python3 is a venv with pip
# torch; on Debian it is /usr/bin/python3 with python3-torch, while the first
# python3 on PATH may be another interpreter without torch at all. Without
# a tensor engine (no torch found) the first candidate is taken.
#
# pybind11 is found from Debian's package or from the interpreter's pip
# package (`python3 -m pybind11 --cmakedir`). MONARCH_PYTHON_PROBLEM says in
# one line what is missing when something is.

# Prints the directory of the libtorch_cpu that `import torch` maps, or fails.
set(_monarch_torch_probe [=[
import os, torch
for line in open("/proc/self/maps"):
    path = line.split()[-1]
    if "/libtorch_cpu.so" in path:
        print(os.path.dirname(os.path.realpath(path)))
        break
else:
    raise SystemExit("libtorch_cpu is not mapped")
]=])

function(_monarch_python_torch_dir python out)
  execute_process(COMMAND "${python}" -c "${_monarch_torch_probe}"
    OUTPUT_VARIABLE dir ERROR_QUIET RESULT_VARIABLE rc
    OUTPUT_STRIP_TRAILING_WHITESPACE TIMEOUT 120)
  if(rc EQUAL 0)
    set(${out} "${dir}" PARENT_SCOPE)
  else()
    set(${out} "" PARENT_SCOPE)
  endif()
endfunction()

macro(monarch_find_python)
  set(MONARCH_PYTHON_PROBLEM "")
  get_property(_torch_dir GLOBAL PROPERTY MONARCH_TORCH_LIBRARY_DIR)
  if(NOT Python3_EXECUTABLE)
    find_program(_path_python3 python3 NO_CACHE)
    set(_candidates)
    foreach(_c IN ITEMS "${_path_python3}" /usr/bin/python3)
      if(_c AND EXISTS "${_c}")
        list(APPEND _candidates "${_c}")
      endif()
    endforeach()
    list(REMOVE_DUPLICATES _candidates)
    set(_chosen "")
    if(_torch_dir)
      foreach(_c IN LISTS _candidates)
        _monarch_python_torch_dir("${_c}" _dir)
        if(_dir STREQUAL _torch_dir)
          set(_chosen "${_c}")
          break()
        endif()
      endforeach()
      if(NOT _chosen)
        string(REPLACE ";" ", " _tried "${_candidates}")
        set(MONARCH_PYTHON_PROBLEM
            "no python3 imports the torch this build links (${_torch_dir}); tried ${_tried}: pass -DPython3_EXECUTABLE=...")
      endif()
    elseif(_candidates)
      list(GET _candidates 0 _chosen)
    else()
      set(MONARCH_PYTHON_PROBLEM "no python3 found: pass -DPython3_EXECUTABLE=...")
    endif()
    if(_chosen)
      set(Python3_EXECUTABLE "${_chosen}" CACHE FILEPATH
          "The Python the monarch extensions are built for" FORCE)
    endif()
  elseif(_torch_dir)
    _monarch_python_torch_dir("${Python3_EXECUTABLE}" _dir)
    if(NOT _dir STREQUAL _torch_dir)
      set(MONARCH_PYTHON_PROBLEM
          "${Python3_EXECUTABLE} does not import the torch this build links (${_torch_dir})")
    endif()
  endif()

  set(Python3_FOUND FALSE)
  set(pybind11_FOUND FALSE)
  if(NOT MONARCH_PYTHON_PROBLEM)
    find_package(Python3 COMPONENTS Interpreter Development.Module QUIET)
    if(NOT Python3_FOUND)
      set(MONARCH_PYTHON_PROBLEM
          "the development headers of ${Python3_EXECUTABLE} were not found (Debian: python3-dev)")
    else()
      execute_process(COMMAND "${Python3_EXECUTABLE}" -m pybind11 --cmakedir
        OUTPUT_VARIABLE _pybind11_pip ERROR_QUIET RESULT_VARIABLE _rc
        OUTPUT_STRIP_TRAILING_WHITESPACE)
      if(NOT _rc EQUAL 0)
        set(_pybind11_pip "")
      endif()
      find_package(pybind11 CONFIG QUIET
        HINTS ${_pybind11_pip} /usr/lib/cmake/pybind11 /usr/share/cmake/pybind11
              /usr/lib/python3/dist-packages/pybind11/share/cmake/pybind11)
      if(NOT pybind11_FOUND)
        set(MONARCH_PYTHON_PROBLEM
            "pybind11 not found for ${Python3_EXECUTABLE} (Debian: pybind11-dev; pip: pybind11)")
      endif()
    endif()
  endif()
  if(Python3_FOUND AND pybind11_FOUND)
    message(STATUS "monarch: Python extensions for ${Python3_EXECUTABLE} "
                   "(Python ${Python3_VERSION}, pybind11 ${pybind11_VERSION})")
  endif()
endmacro()
