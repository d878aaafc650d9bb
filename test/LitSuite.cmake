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
set(MONARCH_HAVE_STATIC_OPT 0)
if(TARGET monarch-opt-static)
  set(MONARCH_HAVE_STATIC_OPT 1)
endif()
set(MONARCH_HAVE_RUN_NOCOMPILER 0)
if(TARGET monarch-run-nocompiler)
  set(MONARCH_HAVE_RUN_NOCOMPILER 1)
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
foreach(tool monarch-opt-static monarch-run-nocompiler)
  if(TARGET ${tool})
    list(APPEND lit_deps ${tool})
  endif()
endforeach()
add_custom_target(check-monarch-lit
  COMMAND ${MONARCH_LLVM_TOOLS_DIR}/lit -sv ${CMAKE_CURRENT_BINARY_DIR}
  DEPENDS ${lit_deps}
  USES_TERMINAL)

# The compiler's suites once more, every `monarch-opt` of them replaced by
# monarch-opt-static (lit's --param TOOL=PATH): the carried binary must pass
# everything the development one passes. One ctest entry; on failure its
# output names the failing tests. (test/Integration is monarch-run's, whose
# external compile test/Integration/external-compile.test covers.)
if(TARGET monarch-opt-static)
  add_test(NAME lit.monarch-opt-static
    COMMAND ${MONARCH_LLVM_TOOLS_DIR}/lit -sv
            --param monarch-opt=$<TARGET_FILE:monarch-opt-static>
            --filter "^monarch :: (Dialect|Transforms|Conversion|Tools|Examples)/"
            ${CMAKE_CURRENT_BINARY_DIR})
endif()
