# monarch_static_link_libraries(<out-var> MLIR <lib>... LLVM <lib>...)
#
# Sets <out-var> to the link line of a self-contained executable: the static
# archives (libMLIR*.a, libLLVM*.a) of the given MLIR and LLVM libraries and of
# everything they depend on, then the system libraries they name.
#
# Why not just link the imported targets: Debian's LLVM is built with
# LLVM_LINK_LLVM_DYLIB, so the exported static MLIR libraries name the shared
# libLLVM.so ("LLVM") as their dependency, and LLVMSupport names shared zlib,
# zstd and z3. Linking them as targets would put libLLVM.so, and with it a
# second copy of every LLVM global, beside the archives. So this walks the
# targets' INTERFACE_LINK_LIBRARIES itself and rewrites what it finds:
#   - "LLVM"/"MLIR" (the dylibs) are dropped: the caller lists the LLVM
#     components the MLIR libraries need (LLVM ...), which are found by link
#     errors once and are few (Support, Demangle, ...);
#   - ZLIB::ZLIB becomes libz.a, zstd becomes libzstd.a when installed and is
#     dropped otherwise (only LLVM's compression code uses it; the link fails
#     with undefined ZSTD_* symbols if that code were ever pulled in);
#   - z3 is dropped (only LLVM's SMT solver wrapper uses it);
#   - rt, dl, m stay as -l flags (they are glibc).
# Archives are listed once each, in one --start-group: lld resolves archive
# members in any order anyway, GNU ld needs the group for the cycles between
# MLIR's libraries.
include_guard(GLOBAL)

function(monarch_static_link_libraries out)
  cmake_parse_arguments(ARG "" "" "MLIR;LLVM" ${ARGN})
  find_library(MONARCH_ZLIB_STATIC NAMES libz.a)
  find_library(MONARCH_ZSTD_STATIC NAMES libzstd.a)

  set(archives)
  set(system)
  set(seen)
  set(stack ${ARG_MLIR} ${ARG_LLVM})
  while(stack)
    list(POP_FRONT stack lib)
    # $<LINK_ONLY:X> is X for an executable's link line.
    string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" lib "${lib}")
    if(lib IN_LIST seen)
      continue()
    endif()
    list(APPEND seen ${lib})
    if(lib STREQUAL "LLVM" OR lib STREQUAL "MLIR")
      continue()
    elseif(lib STREQUAL "ZLIB::ZLIB")
      if(NOT MONARCH_ZLIB_STATIC)
        message(FATAL_ERROR "monarch: the static link needs libz.a (zlib1g-dev)")
      endif()
      list(APPEND system ${MONARCH_ZLIB_STATIC})
    elseif(lib MATCHES "^zstd::")
      if(MONARCH_ZSTD_STATIC)
        list(APPEND system ${MONARCH_ZSTD_STATIC})
      endif()
    elseif(lib MATCHES "libz3")
      continue()
    elseif(lib MATCHES "^(rt|dl|m|pthread)$")
      list(APPEND system ${lib})
    elseif(TARGET ${lib})
      get_target_property(type ${lib} TYPE)
      if(NOT type STREQUAL "STATIC_LIBRARY")
        message(FATAL_ERROR
          "monarch: ${lib} is a ${type}, not a static library; a "
          "self-contained link cannot take it")
      endif()
      list(APPEND archives "$<TARGET_LINKER_FILE:${lib}>")
      get_target_property(deps ${lib} INTERFACE_LINK_LIBRARIES)
      if(deps)
        list(APPEND stack ${deps})
      endif()
    else()
      message(FATAL_ERROR
        "monarch: ${lib} (a dependency of the static MLIR/LLVM libraries) is "
        "neither a target nor a known system library")
    endif()
  endwhile()
  list(REMOVE_DUPLICATES system)
  set(${out} -Wl,--start-group ${archives} -Wl,--end-group ${system}
      PARENT_SCOPE)
endfunction()
