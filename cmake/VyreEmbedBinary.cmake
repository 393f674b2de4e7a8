# cmake -DINPUT=file -DOUTPUT=file.cc -DSYMBOL=name -P VyreEmbedBinary.cmake
# Defines  extern const unsigned char <name>[];  extern const size_t <name>_size;
file(READ ${INPUT} hex HEX)
string(LENGTH "${hex}" hex_length)
math(EXPR size "${hex_length} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "((0x..,){16})" "\\1\n" bytes "${bytes}")
file(WRITE ${OUTPUT} "// Generated from ${INPUT}; do not edit.\n#include <cstddef>\n"
     "extern const unsigned char ${SYMBOL}[];\nextern const size_t ${SYMBOL}_size;\n"
     "alignas(8) const unsigned char ${SYMBOL}[] = {\n${bytes}};\n"
     "const size_t ${SYMBOL}_size = ${size};\n")
