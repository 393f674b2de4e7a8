# vyre_read_api_functions(<header> <out>): the names of the VYRE_API functions
# <header> declares, in header order, into the list <out>. Comments are
# dropped first, so their text cannot look like a declaration; a declaration
# is "VYRE_API <return type> vyre_name(" with no ';', '(', '#', '{' or '}'
# between (which also keeps preprocessor lines out). Shared by
# check_symbols.cmake and check_error_cases.cmake.
function(vyre_read_api_functions header out)
  file(READ ${header} text)
  string(REGEX REPLACE "/\\*([^*]|\\*+[^*/])*\\*+/" " " text "${text}")
  string(REGEX REPLACE "//[^\n]*" " " text "${text}")
  string(REGEX MATCHALL "VYRE_API[^;(#{}]*\\(" declarations "${text}")
  set(names "")
  foreach(declaration IN LISTS declarations)
    if(declaration MATCHES "(vyre_[A-Za-z0-9_]+)[ \t\r\n]*\\($")
      list(APPEND names "${CMAKE_MATCH_1}")
    endif()
  endforeach()
  set(${out} "${names}" PARENT_SCOPE)
endfunction()
