# abi.abidiff: the built library's ABI against abi/vyre_cuda.abi (abidw's
# baseline, scripts/abi-baseline.sh). New functions pass (--no-added-syms);
# any other difference fails: a removed or changed function, and a changed
# type under any exported function (abidiff counts a moved or resized field as
# an "ABI change", exit bit 4, not as an incompatible one). A field appended
# to a descriptor is compatible under the struct_size rule, but still shows
# here: refresh the baseline with scripts/abi-baseline.sh when it is meant.
#   cmake -DABIDIFF=... -DBASELINE=... -DLIBRARY=... -DHEADERS=... -P check_abidiff.cmake
foreach(var ABIDIFF BASELINE LIBRARY HEADERS)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "check_abidiff.cmake: -D${var}=... is missing")
  endif()
endforeach()
# The baseline was filtered when written; only the library's types are
# matched against the headers (the baseline's paths are another checkout's).
execute_process(
  COMMAND ${ABIDIFF} --no-added-syms --headers-dir2 ${HEADERS} --drop-private-types
          --exported-interfaces-only ${BASELINE} ${LIBRARY}
  RESULT_VARIABLE code
  OUTPUT_VARIABLE report
  ERROR_VARIABLE report)
message("${report}")
if(NOT code MATCHES "^[0-9]+$")
  message(FATAL_ERROR "abidiff did not run: ${code}. Fix: apt-get install abigail-tools.")
endif()
math(EXPR error "${code} & 3")
if(NOT error EQUAL 0)
  message(FATAL_ERROR "abi.abidiff: abidiff failed (exit ${code}). Fix: check that ${LIBRARY} "
                      "has debug info and that ${BASELINE} was written by "
                      "scripts/abi-baseline.sh.")
endif()
if(NOT code EQUAL 0)
  message(FATAL_ERROR "abi.abidiff: the ABI differs from ${BASELINE} (exit ${code}, report "
                      "above). Fix: keep the C ABI as it was (add functions, append fields "
                      "under struct_size); if the change is intended, run "
                      "scripts/abi-baseline.sh and commit abi/vyre_cuda.abi (and bump "
                      "VYRE_CUDA_VERSION_MAJOR for a break).")
endif()
message("abi.abidiff: OK")
