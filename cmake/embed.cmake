# cake_embed(<target> <namespace> <out.cpp> FILES f1 f2 ...)
# Generates <out.cpp> holding every file as a raw string literal, keyed by its base name,
# so the library needs neither the source tree nor any install step at run time.
function(cake_embed out_cpp symbol)
  cmake_parse_arguments(ARG "" "" "FILES" ${ARGN})
  add_custom_command(
    OUTPUT ${out_cpp}
    COMMAND ${CMAKE_COMMAND} -DOUT=${out_cpp} -DSYMBOL=${symbol} "-DFILES=${ARG_FILES}"
            -P ${PROJECT_SOURCE_DIR}/cmake/embed_files.cmake
    DEPENDS ${ARG_FILES} ${PROJECT_SOURCE_DIR}/cmake/embed_files.cmake
    COMMENT "Embedding ${symbol}"
    VERBATIM)
endfunction()
