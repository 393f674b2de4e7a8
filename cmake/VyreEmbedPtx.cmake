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
