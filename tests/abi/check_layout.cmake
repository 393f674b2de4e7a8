# Runs the layout dumper and compares its output with abi/vyre_cuda.layout.
#   cmake -DDUMPER=layout_dump -DEXPECTED=abi/vyre_cuda.layout -P check_layout.cmake
cmake_minimum_required(VERSION 3.25)

execute_process(COMMAND ${DUMPER} OUTPUT_VARIABLE actual RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "${DUMPER} failed (${result})")
endif()
file(READ ${EXPECTED} expected)
if(NOT actual STREQUAL expected)
  string(REPLACE "\n" ";" actual_lines "${actual}")
  string(REPLACE "\n" ";" expected_lines "${expected}")
  set(only_actual ${actual_lines})
  list(REMOVE_ITEM only_actual ${expected_lines})
  set(only_expected ${expected_lines})
  list(REMOVE_ITEM only_expected ${actual_lines})
  string(REPLACE ";" "\n  " a "${only_actual}")
  string(REPLACE ";" "\n  " e "${only_expected}")
  message(FATAL_ERROR "The public struct/enum layout changed.\n"
          "Now:\n  ${a}\nRecorded in ${EXPECTED}:\n  ${e}\n"
          "Fix: if the change is intended (fields appended to an extensible struct, or a "
          "major version bump), regenerate the file with: ${DUMPER} > ${EXPECTED}")
endif()
message(STATUS "layout matches ${EXPECTED}")
