# Configures the lit suite of the compiler (included from test/CMakeLists.txt
# when monarch-opt is built). Run it with
#   /usr/lib/llvm-22/bin/lit -sv <build>/test
set(MONARCH_LIT_TOOLS_DIR ${CMAKE_RUNTIME_OUTPUT_DIRECTORY})
set(MONARCH_LLVM_TOOLS_DIR ${LLVM_TOOLS_BINARY_DIR})
if(NOT MONARCH_LLVM_TOOLS_DIR)
  set(MONARCH_LLVM_TOOLS_DIR /usr/lib/llvm-22/bin)
endif()
set(MONARCH_HAVE_FUZZER 0)
if(TARGET monarch-fuzz)
  set(MONARCH_HAVE_FUZZER 1)
endif()
configure_file(${CMAKE_CURRENT_SOURCE_DIR}/lit.site.cfg.py.in
               ${CMAKE_CURRENT_BINARY_DIR}/lit.site.cfg.py @ONLY)

# `ninja check-monarch-lit` builds what the suite needs and runs it.
set(lit_deps monarch-opt)
if(TARGET monarch-fuzz)
  list(APPEND lit_deps monarch-fuzz)
endif()
if(TARGET monarch-run)
  list(APPEND lit_deps monarch-run monarch-tensor-worker)
endif()
add_custom_target(check-monarch-lit
  COMMAND ${MONARCH_LLVM_TOOLS_DIR}/lit -sv ${CMAKE_CURRENT_BINARY_DIR}
  DEPENDS ${lit_deps}
  USES_TERMINAL)
