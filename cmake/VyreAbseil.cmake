# Abseil for the engine: the system's shared Abseil (find_package; the fast
# default for development builds), or with VYRE_CUDA_STATIC_ABSL=ON Debian's
# Abseil source compiled here as static position-independent code with hidden
# visibility and linked into libvyre_cuda.so, which then needs only libc,
# libstdc++, libgcc_s and libm at run time (the installed and bundled library;
# the `release` preset).
#
# The source tree comes from scripts/fetch-abseil-source.sh (apt-get source +
# dpkg-source -x, cached in the git-ignored .deps/src); it is found, in this
# order, through -DVYRE_CUDA_ABSL_SOURCE_DIR, the environment variable of that
# name, and ${PROJECT_SOURCE_DIR}/.deps/src. Either names an Abseil tree or a
# folder holding abseil-*/ trees (the newest Debian-patched one is taken).

option(VYRE_CUDA_STATIC_ABSL
  "Link Abseil statically (from Debian's source, hidden) into libvyre_cuda.so" OFF)

if(NOT VYRE_CUDA_STATIC_ABSL)
  find_package(absl REQUIRED)
  install(CODE "message(STATUS \"Note: this libvyre_cuda.so needs the system's shared \"
    \"Abseil (libabsl_*) at run time; the release preset (-DVYRE_CUDA_STATIC_ABSL=ON) \"
    \"builds the self-contained one.\")")
  return()
endif()

set(VYRE_CUDA_ABSL_SOURCE_DIR "" CACHE PATH
  "Abseil source tree, or a folder of abseil-*/ trees (default: $ENV{VYRE_CUDA_ABSL_SOURCE_DIR} or .deps/src)")

function(vyre_find_absl_source out)
  set(candidates "")
  foreach(place "${VYRE_CUDA_ABSL_SOURCE_DIR}" "$ENV{VYRE_CUDA_ABSL_SOURCE_DIR}"
                "${PROJECT_SOURCE_DIR}/.deps/src")
    if(place STREQUAL "")
      continue()
    endif()
    if(EXISTS "${place}/absl/base/options.h")
      set(${out} "${place}" PARENT_SCOPE)
      return()
    endif()
    file(GLOB trees LIST_DIRECTORIES true "${place}/abseil-*")
    # Debian-patched trees (those with debian/) first, newest last in each.
    set(patched "")
    set(plain "")
    foreach(tree IN LISTS trees)
      if(EXISTS "${tree}/absl/base/options.h" AND EXISTS "${tree}/CMakeLists.txt")
        if(EXISTS "${tree}/debian/changelog")
          list(APPEND patched "${tree}")
        else()
          list(APPEND plain "${tree}")
        endif()
      endif()
    endforeach()
    foreach(group patched plain)
      if(${group})
        list(SORT ${group} COMPARE NATURAL)
        list(GET ${group} -1 chosen)
        set(${out} "${chosen}" PARENT_SCOPE)
        return()
      endif()
    endforeach()
    # The first place given is the only one looked at: a wrong path is an
    # error, not a reason to take another tree silently.
    set(${out} "NOTFOUND:${place}" PARENT_SCOPE)
    return()
  endforeach()
endfunction()

vyre_find_absl_source(VYRE_ABSL_TREE)
if(VYRE_ABSL_TREE MATCHES "^NOTFOUND:(.*)$")
  set(place "${CMAKE_MATCH_1}")
  if(place STREQUAL "${PROJECT_SOURCE_DIR}/.deps/src")
    set(fix "run scripts/fetch-abseil-source.sh.")
  else()
    set(fix "run scripts/fetch-abseil-source.sh ${place} (or point VYRE_CUDA_ABSL_SOURCE_DIR at an Abseil source tree).")
  endif()
  message(FATAL_ERROR
    "Abseil source for VYRE_CUDA_STATIC_ABSL=ON: none in ${place} (no absl/base/options.h "
    "there or in an abseil-*/ folder under it); the self-contained library compiles "
    "Debian's Abseil source into itself. Fix: ${fix}")
endif()

# The version: Debian's changelog where there is one, else the LTS macro.
set(VYRE_ABSL_VERSION "")
if(EXISTS "${VYRE_ABSL_TREE}/debian/changelog")
  file(STRINGS "${VYRE_ABSL_TREE}/debian/changelog" first LIMIT_COUNT 1)
  if(first MATCHES "^abseil \\(([^)]+)\\)")
    set(VYRE_ABSL_VERSION "${CMAKE_MATCH_1} (Debian, patches applied)")
  endif()
else()
  message(WARNING "${VYRE_ABSL_TREE} has no debian/ folder: it is upstream's tarball without "
                  "Debian's patches (options.h differs from Debian's headers; the library "
                  "still builds and hides it). Fix: run scripts/fetch-abseil-source.sh on a "
                  "Debian machine and use its tree.")
endif()
file(STRINGS "${VYRE_ABSL_TREE}/absl/base/config.h" lts REGEX "^#define ABSL_LTS_RELEASE_VERSION ")
string(REGEX REPLACE "^#define ABSL_LTS_RELEASE_VERSION " "" lts "${lts}")
if(VYRE_ABSL_VERSION STREQUAL "")
  set(VYRE_ABSL_VERSION "LTS ${lts}")
endif()
# The engine is written against Debian 12's Abseil; another LTS may differ in
# the APIs it uses.
if(NOT lts STREQUAL "20220623")
  message(WARNING "Abseil in ${VYRE_ABSL_TREE} is LTS ${lts}, not 20220623 (Debian 12's, the "
                  "one the engine is built and tested with). Fix: run "
                  "scripts/fetch-abseil-source.sh on Debian 12, or expect build errors.")
endif()
message(STATUS "Abseil: static, hidden, from ${VYRE_ABSL_TREE} (${VYRE_ABSL_VERSION})")

# Abseil's variables live in this block only. Its targets are compiled only
# where the library links them (EXCLUDE_FROM_ALL), never its tests, never
# installed; position-independent (CMAKE_POSITION_INDEPENDENT_CODE is ON here),
# the project's C++ standard propagated, hidden visibility.
block(SCOPE_FOR VARIABLES)
  set(BUILD_TESTING OFF)
  set(ABSL_BUILD_TESTING OFF)
  set(ABSL_ENABLE_INSTALL OFF)
  set(ABSL_PROPAGATE_CXX_STD ON)
  set(BUILD_SHARED_LIBS OFF)
  set(CMAKE_CXX_VISIBILITY_PRESET hidden)
  set(CMAKE_VISIBILITY_INLINES_HIDDEN ON)
  set(CMAKE_POSITION_INDEPENDENT_CODE ON)
  # Abseil's thread_locals are all constant-initialised (ABSL_CONST_INIT), so
  # no TU needs their init wrappers; without this GCC leaves a weak undefined
  # _ZTH...cordz_next_sample in the library's dynamic table, for any other
  # library in the process to satisfy.
  string(APPEND CMAKE_CXX_FLAGS " -fno-extern-tls-init")
  add_subdirectory("${VYRE_ABSL_TREE}" "${PROJECT_BINARY_DIR}/_deps/abseil" EXCLUDE_FROM_ALL)
endblock()
