# vyre_embed_ptx(<target> <symbol> <source.cu>)
#
# Compiles one CUDA source to PTX with nvcc at build time and embeds the text
# in a static library <target> that defines
#   extern "C++" const char <symbol>[];   (NUL-terminated PTX)
# PTX for a low virtual architecture JITs on every device the driver supports.
set(VYRE_EMBED_SCRIPT ${CMAKE_CURRENT_LIST_DIR}/VyreEmbedFile.cmake)
set(VYRE_PTX_ARCH "compute_75" CACHE STRING "Virtual architecture of embedded PTX")

function(vyre_embed_ptx target symbol source)
  get_filename_component(stem ${source} NAME_WE)
  set(ptx ${CMAKE_CURRENT_BINARY_DIR}/${stem}.ptx)
  set(cc ${CMAKE_CURRENT_BINARY_DIR}/${stem}_ptx.cc)
  add_custom_command(
    OUTPUT ${ptx}
    COMMAND ${CUDAToolkit_NVCC_EXECUTABLE} -ptx -arch=${VYRE_PTX_ARCH} -lineinfo
            -o ${ptx} ${CMAKE_CURRENT_SOURCE_DIR}/${source}
    DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${source}
    COMMENT "nvcc -ptx ${source}"
    VERBATIM)
  add_custom_command(
    OUTPUT ${cc}
    COMMAND ${CMAKE_COMMAND} -DINPUT=${ptx} -DOUTPUT=${cc} -DSYMBOL=${symbol}
            -P ${VYRE_EMBED_SCRIPT}
    DEPENDS ${ptx} ${VYRE_EMBED_SCRIPT}
    VERBATIM)
  add_library(${target} STATIC ${cc})
  # Hidden: the library's version script exports vyre_*, and an embedded
  # blob is no part of the ABI.
  set_target_properties(${target} PROPERTIES CXX_VISIBILITY_PRESET hidden)
endfunction()

# vyre_embed_fatbin(<target> <symbol> <source.cu>)
#
# Compiles one CUDA source to a fatbin with nvcc at build time: machine code
# (SASS) for the architectures of VYRE_FATBIN_GENCODE plus PTX for a low
# virtual architecture, which the driver JITs on any other device. Embeds it
# in a static library <target> that defines
#   extern const unsigned char <symbol>[];   extern const size_t <symbol>_size;
# A large module as PTX costs a JIT of hundreds of milliseconds the first time
# a process loads it; its SASS loads in milliseconds. Uncompressed, so that
# the tests' fake driver can read the entries (it reads no compressed code).
set(VYRE_EMBED_BINARY_SCRIPT ${CMAKE_CURRENT_LIST_DIR}/VyreEmbedBinary.cmake)
set(VYRE_FATBIN_GENCODE
    "arch=compute_75,code=compute_75;arch=compute_80,code=sm_80;arch=compute_90,code=sm_90"
    CACHE STRING "nvcc -gencode values of embedded fatbins (SASS, and PTX for the rest)")

function(vyre_embed_fatbin target symbol source)
  get_filename_component(stem ${source} NAME_WE)
  set(fatbin ${CMAKE_CURRENT_BINARY_DIR}/${stem}.fatbin)
  set(cc ${CMAKE_CURRENT_BINARY_DIR}/${stem}_fatbin.cc)
  set(gencode "")
  foreach(code ${VYRE_FATBIN_GENCODE})
    list(APPEND gencode -gencode ${code})
  endforeach()
  add_custom_command(
    OUTPUT ${fatbin}
    COMMAND ${CUDAToolkit_NVCC_EXECUTABLE} -fatbin --no-compress -lineinfo ${gencode}
            -o ${fatbin} ${CMAKE_CURRENT_SOURCE_DIR}/${source}
    DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${source}
    COMMENT "nvcc -fatbin ${source}"
    VERBATIM)
  add_custom_command(
    OUTPUT ${cc}
    COMMAND ${CMAKE_COMMAND} -DINPUT=${fatbin} -DOUTPUT=${cc} -DSYMBOL=${symbol}
            -P ${VYRE_EMBED_BINARY_SCRIPT}
    DEPENDS ${fatbin} ${VYRE_EMBED_BINARY_SCRIPT}
    VERBATIM)
  add_library(${target} STATIC ${cc})
  set_target_properties(${target} PROPERTIES CXX_VISIBILITY_PRESET hidden)
endfunction()

# vyre_embed_devlinked_fatbin(<target> <symbol> <source.cu>)
#
# As vyre_embed_fatbin, for kernels that call the device runtime
# (cudaGraphSetConditional and the like live in libcudadevrt.a): compiled with
# -rdc and device-linked against cudadevrt into machine code for
# VYRE_DEVLINK_ARCHS only, since device-runtime calls cannot stay PTX for the
# driver to JIT. SASS of an architecture runs on later minor versions of its
# major (sm_80 on 8.6 and 8.9, sm_100 on 10.3, sm_120 on 12.1).
set(VYRE_DEVLINK_ARCHS "75;80;90;100;110;120"
    CACHE STRING "SASS architectures of device-linked embedded fatbins")

function(vyre_embed_devlinked_fatbin target symbol source)
  get_filename_component(stem ${source} NAME_WE)
  set(object ${CMAKE_CURRENT_BINARY_DIR}/${stem}.rdc.o)
  set(fatbin ${CMAKE_CURRENT_BINARY_DIR}/${stem}.fatbin)
  set(cc ${CMAKE_CURRENT_BINARY_DIR}/${stem}_fatbin.cc)
  set(gencode "")
  foreach(arch ${VYRE_DEVLINK_ARCHS})
    list(APPEND gencode -gencode arch=compute_${arch},code=sm_${arch})
  endforeach()
  add_custom_command(
    OUTPUT ${fatbin}
    COMMAND ${CUDAToolkit_NVCC_EXECUTABLE} -rdc=true ${gencode} -c
            -o ${object} ${CMAKE_CURRENT_SOURCE_DIR}/${source}
    COMMAND ${CUDAToolkit_NVCC_EXECUTABLE} -dlink -fatbin --no-compress ${gencode}
            -o ${fatbin} ${object} -lcudadevrt
    DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${source}
    COMMENT "nvcc -rdc -dlink -fatbin ${source}"
    VERBATIM)
  add_custom_command(
    OUTPUT ${cc}
    COMMAND ${CMAKE_COMMAND} -DINPUT=${fatbin} -DOUTPUT=${cc} -DSYMBOL=${symbol}
            -P ${VYRE_EMBED_BINARY_SCRIPT}
    DEPENDS ${fatbin} ${VYRE_EMBED_BINARY_SCRIPT}
    VERBATIM)
  add_library(${target} STATIC ${cc})
  set_target_properties(${target} PROPERTIES CXX_VISIBILITY_PRESET hidden)
endfunction()
