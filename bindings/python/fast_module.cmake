# The compiled fast path, vyre_cuda._fast (src/_fast.c): a CPython extension
# module written against the CPython C API. It links nothing of vyre-cuda
# (the package hands it the library's entry points, loaded through ctypes),
# only includes vyre_cuda.h for the types.
#
# Included from bindings/python/CMakeLists.txt (the test build: the module
# lands in the build tree, and the Python tests find it through
# VYRE_CUDA_EXTENSION_DIR) and, for the wheel, right after the top-level
# project() through CMAKE_PROJECT_vyre_cuda_INCLUDE (pyproject.toml), which
# also installs it into the package (component python_wheel).
if(TARGET vyre_cuda_python_fast)
  return()
endif()

find_package(Python3 COMPONENTS Interpreter Development.Module)
if(NOT Python3_Development.Module_FOUND)
  if(SKBUILD)
    message(FATAL_ERROR "vyre_cuda._fast: the Python headers (Python.h) were not found for "
                        "${Python3_EXECUTABLE}. Fix: install python3-dev (Debian) or the "
                        "interpreter's development package.")
  endif()
  message(WARNING "vyre_cuda._fast: the Python headers (Python.h) were not found: the "
                  "compiled fast path is not built and the Python tests run the ctypes path "
                  "only. Fix: apt-get install python3-dev.")
  set(VYRE_CUDA_PYTHON_FAST_BUILT OFF)
  return()
endif()

Python3_add_library(vyre_cuda_python_fast MODULE WITH_SOABI
                    ${CMAKE_CURRENT_LIST_DIR}/src/_fast.c)
set_target_properties(vyre_cuda_python_fast PROPERTIES
  OUTPUT_NAME _fast
  C_STANDARD 11
  C_EXTENSIONS ON  # __typeof__
  C_VISIBILITY_PRESET hidden
  LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/vyre_cuda_fast)
target_include_directories(vyre_cuda_python_fast PRIVATE
                           ${CMAKE_CURRENT_LIST_DIR}/../../include)
target_compile_options(vyre_cuda_python_fast PRIVATE -Wall -Wextra -Wno-missing-field-initializers)
set(VYRE_CUDA_PYTHON_FAST_BUILT ON)

if(SKBUILD)
  install(TARGETS vyre_cuda_python_fast
          LIBRARY DESTINATION vyre_cuda
          COMPONENT python_wheel EXCLUDE_FROM_ALL)
endif()
