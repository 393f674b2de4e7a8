# cmake -DBUILD_DIR=... -DWORK_DIR=... -DSOURCE=consumer.c -DCC=cc -P install_check.cmake
#
# Installs the build into a scratch prefix, then builds a C consumer with
# nothing but `pkg-config --cflags --libs vyre_cuda` from that prefix and runs
# it: the installed header, library, SONAME links and .pc file work together
# wherever the prefix lands (the .pc file is relocatable).
file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix}
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install failed (${rc})")
endif()
file(GLOB_RECURSE pc_files ${prefix}/*/vyre_cuda.pc)
list(LENGTH pc_files pc_count)
if(NOT pc_count EQUAL 1)
  message(FATAL_ERROR "expected one installed vyre_cuda.pc, found: ${pc_files}")
endif()
get_filename_component(pc_dir ${pc_files} DIRECTORY)
file(GLOB_RECURSE cmake_configs ${prefix}/*/vyre_cudaConfig.cmake)
if(NOT cmake_configs)
  message(FATAL_ERROR "no installed vyre_cudaConfig.cmake under ${prefix}")
endif()
set(ENV{PKG_CONFIG_PATH} ${pc_dir})
execute_process(COMMAND pkg-config --cflags --libs vyre_cuda
                OUTPUT_VARIABLE flags RESULT_VARIABLE rc OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "pkg-config could not read ${pc_files}")
endif()
separate_arguments(flags UNIX_COMMAND "${flags}")
# The build's own C flags (sanitizers in the asan preset must link first).
separate_arguments(cflags UNIX_COMMAND "${CFLAGS}")
execute_process(COMMAND ${CC} ${cflags} -std=c99 -Wall -Werror ${SOURCE} ${flags} -o ${WORK_DIR}/consumer
                RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "building against the installed library failed:\n${err}")
endif()
string(REGEX MATCH "-L([^ ;]+)" _ "${flags}")
set(ENV{LD_LIBRARY_PATH} "${CMAKE_MATCH_1}:$ENV{LD_LIBRARY_PATH}")
set(ENV{VYRE_CUDA_DRIVER_LIBRARY} /nonexistent/libcuda.so.1)
execute_process(COMMAND ${WORK_DIR}/consumer RESULT_VARIABLE rc OUTPUT_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the installed consumer failed (${rc}): ${out}")
endif()
message(STATUS "${out}")
