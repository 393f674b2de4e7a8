# Keeps docs/ERROR_CASES.md true: every VYRE_API function of the header has a
# "### <function>" section, and every test the document names exists: a
# "file_test.cc:Suite.Name" reference needs TEST/TEST_F/TEST_P(Suite, Name)
# in that file under one of TEST_DIRS, a bare "file_test.c" reference needs
# the file. Fails listing every problem.
#
#   cmake -DHEADER=include/vyre_cuda.h -DDOC=docs/ERROR_CASES.md
#         -DTEST_DIRS="tests/unit|tests/abi" -P check_error_cases.cmake
cmake_minimum_required(VERSION 3.25)

foreach(var HEADER DOC TEST_DIRS)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "check_error_cases.cmake: -D${var}=... is required")
  endif()
endforeach()

string(REPLACE "|" ";" TEST_DIRS "${TEST_DIRS}")
set(problems "")

# --- the header's VYRE_API functions -------------------------------------------
include(${CMAKE_CURRENT_LIST_DIR}/api_functions.cmake)
vyre_read_api_functions(${HEADER} declared)
if(declared STREQUAL "")
  list(APPEND problems "found no VYRE_API declarations in ${HEADER}")
endif()

file(READ ${DOC} doc_text)
foreach(function IN LISTS declared)
  string(FIND "${doc_text}" "\n### ${function}\n" at)
  if(at EQUAL -1)
    list(APPEND problems "${function} (VYRE_API in ${HEADER}) has no '### ${function}' section")
  endif()
endforeach()

# --- the tests the document names ----------------------------------------------
function(find_test_file name out)
  foreach(dir IN LISTS TEST_DIRS)
    if(EXISTS "${dir}/${name}")
      set(${out} "${dir}/${name}" PARENT_SCOPE)
      return()
    endif()
  endforeach()
  set(${out} "" PARENT_SCOPE)
endfunction()

string(REGEX MATCHALL "[A-Za-z0-9_]+_test\\.cc:[A-Za-z0-9_]+\\.[A-Za-z0-9_]+" references
       "${doc_text}")
list(REMOVE_DUPLICATES references)
list(LENGTH references reference_count)
if(reference_count EQUAL 0)
  list(APPEND problems "found no test references in ${DOC}")
endif()
foreach(reference IN LISTS references)
  string(REGEX MATCH "^([^:]+):([^.]+)\\.(.+)$" parts "${reference}")
  set(file_name "${CMAKE_MATCH_1}")
  set(suite "${CMAKE_MATCH_2}")
  set(test "${CMAKE_MATCH_3}")
  find_test_file("${file_name}" path)
  if(path STREQUAL "")
    list(JOIN TEST_DIRS ", " dirs)
    list(APPEND problems "${reference}: no ${file_name} in ${dirs}")
    continue()
  endif()
  file(READ "${path}" source)
  if(NOT source MATCHES "TEST(_F|_P)?\\([ \t\r\n]*${suite}[ \t\r\n]*,[ \t\r\n]*${test}[ \t\r\n]*\\)")
    list(APPEND problems "${reference}: ${path} has no test ${suite}.${test}")
  endif()
endforeach()

string(REGEX MATCHALL "[A-Za-z0-9_]+_test\\.c[^A-Za-z0-9_.]" bare "${doc_text}")
list(REMOVE_DUPLICATES bare)
foreach(match IN LISTS bare)
  string(REGEX REPLACE ".$" "" file_name "${match}")
  find_test_file("${file_name}" path)
  if(path STREQUAL "")
    list(JOIN TEST_DIRS ", " dirs)
    list(APPEND problems "${file_name}: not found in ${dirs}")
  endif()
endforeach()

list(LENGTH declared function_count)
if(problems)
  list(JOIN problems "\n  " text)
  message(FATAL_ERROR "docs/ERROR_CASES.md is out of date:\n  ${text}\n"
                      "Fix: add the function's section or the test, or correct the reference.")
endif()
message(STATUS "${function_count} VYRE_API functions documented, ${reference_count} test "
               "references found")
