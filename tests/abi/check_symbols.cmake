# Compares the dynamic symbols libvyre_cuda.so exports with the function list
# in abi/vyre_cuda.symbols and with the VYRE_API declarations in the header.
# Fails on any difference, on any exported symbol that is not vyre_*, and on
# any vyre_ symbol without a version.
#
#   cmake -DNM=nm -DLIBRARY=libvyre_cuda.so -DHEADER=vyre_cuda.h
#         -DSYMBOLS=abi/vyre_cuda.symbols -P check_symbols.cmake
cmake_minimum_required(VERSION 3.25)

foreach(var NM LIBRARY HEADER SYMBOLS)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "check_symbols.cmake: -D${var}=... is required")
  endif()
endforeach()

# --- exported by the library ---------------------------------------------------
execute_process(COMMAND ${NM} -D --defined-only ${LIBRARY}
                OUTPUT_VARIABLE nm_output ERROR_VARIABLE nm_error RESULT_VARIABLE nm_result)
if(NOT nm_result EQUAL 0)
  message(FATAL_ERROR "${NM} -D --defined-only ${LIBRARY} failed: ${nm_error}")
endif()
string(REPLACE "\n" ";" nm_lines "${nm_output}")
set(exported "")
set(problems "")
foreach(line IN LISTS nm_lines)
  if(line STREQUAL "")
    continue()
  endif()
  # "<address> <type> <name>[@[@]<version>]"
  if(NOT line MATCHES "^[0-9a-fA-F]* *([A-Za-z]) ([^ @]+)(@@?([^ ]+))?$")
    list(APPEND problems "unparsed nm line: '${line}'")
    continue()
  endif()
  set(type "${CMAKE_MATCH_1}")
  set(name "${CMAKE_MATCH_2}")
  set(version "${CMAKE_MATCH_4}")
  # The version node itself (e.g. "A VYRE_CUDA_0") is not a symbol.
  if(type STREQUAL "A" AND name MATCHES "^VYRE_CUDA_[0-9]+$")
    continue()
  endif()
  if(NOT name MATCHES "^vyre_")
    list(APPEND problems "exports a non-vyre_ symbol: ${name} (type ${type})")
    continue()
  endif()
  if(version STREQUAL "")
    list(APPEND problems "${name} has no symbol version")
  endif()
  list(APPEND exported "${name}")
endforeach()
list(REMOVE_DUPLICATES exported)
list(SORT exported)

# --- declared in the header ---------------------------------------------------
include(${CMAKE_CURRENT_LIST_DIR}/api_functions.cmake)
vyre_read_api_functions(${HEADER} declared)
list(SORT declared)
if(declared STREQUAL "")
  list(APPEND problems "found no VYRE_API declarations in ${HEADER}")
endif()

# --- listed in abi/vyre_cuda.symbols -------------------------------------------
file(STRINGS ${SYMBOLS} listed REGEX "^[^#]")
set(sorted_listed ${listed})
list(SORT sorted_listed)
if(NOT sorted_listed STREQUAL listed)
  list(APPEND problems "${SYMBOLS} is not sorted")
endif()

# Appends "<symbol> is in <a> but not in <b>" to `problems` for each symbol
# of list `a` missing from list `b`.
function(report_difference a_name a_list b_name b_list)
  set(found ${problems})
  foreach(symbol IN LISTS a_list)
    if(NOT symbol IN_LIST b_list)
      list(APPEND found "${symbol} is in ${a_name} but not in ${b_name}")
    endif()
  endforeach()
  set(problems ${found} PARENT_SCOPE)
endfunction()

report_difference("the library" "${exported}" "the header" "${declared}")
report_difference("the header" "${declared}" "the library" "${exported}")
report_difference("${SYMBOLS}" "${listed}" "the header" "${declared}")
report_difference("the header" "${declared}" "${SYMBOLS}" "${listed}")

list(LENGTH exported exported_count)
list(LENGTH declared declared_count)
list(LENGTH listed listed_count)
message(STATUS "exported ${exported_count}, declared ${declared_count}, listed ${listed_count}")
if(problems)
  string(REPLACE ";" "\n  " text "${problems}")
  message(FATAL_ERROR "ABI symbol check failed:\n  ${text}\n"
          "Fix: export exactly the header's VYRE_API functions, and keep "
          "abi/vyre_cuda.symbols (sorted) in step with the header.")
endif()
