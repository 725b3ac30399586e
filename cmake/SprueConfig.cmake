# SprueConfig.cmake: lets CMake projects compile sprue kernels at build time.
#
#   find_package(Sprue REQUIRED)        # with -DSprue_DIR="$(sprue --cmake-dir)"
#   sprue_add_kernel(my_kernel SOURCE my_kernel.jaxpr [NAME my_kernel] [OPTIONS -O2 --target-cpu generic])
#   target_link_libraries(app PRIVATE my_kernel)
#
# sprue_add_kernel runs `sprue compile` (an add_custom_command, re-run when SOURCE changes) into
# ${CMAKE_CURRENT_BINARY_DIR}/sprue/<target>/ and defines <target>, an IMPORTED shared library
# carrying lib<NAME>.so and the include directory of <NAME>.h. NAME defaults to SOURCE's stem made
# a C identifier; it is always passed to `sprue compile`, so both agree on it.
#
# The library carries sprue's thread pool and records libpthread itself where glibc keeps it apart
# (before 2.34), so <target> needs no Threads::Threads; only a static archive (`sprue compile --emit
# a`, which this function does not make) needs -lpthread at the host's link.
#
# The `sprue` command is SPRUE_EXECUTABLE (a cache variable: set it to use a particular
# installation); by default the one in $VIRTUAL_ENV, in the repository's .venv (an editable
# install, whose cmake/ is this directory), beside the installed package, or on PATH.

include_guard(GLOBAL)

# (an installed package's cmake/ is <prefix>/lib/pythonX.Y/site-packages/sprue/cmake: its sprue is in
# <prefix>/bin, found without an activated environment)
find_program(SPRUE_EXECUTABLE sprue
  HINTS "$ENV{VIRTUAL_ENV}/bin" "${CMAKE_CURRENT_LIST_DIR}/../.venv/bin" "${CMAKE_CURRENT_LIST_DIR}/../../../../../bin"
  DOC "the sprue command line compiler")
if(NOT SPRUE_EXECUTABLE)
  set(Sprue_FOUND FALSE)
  set(Sprue_NOT_FOUND_MESSAGE "the `sprue` command was not found: activate the environment sprue is installed in, or set SPRUE_EXECUTABLE")
  return()
endif()
execute_process(COMMAND "${SPRUE_EXECUTABLE}" --version OUTPUT_VARIABLE _sprue_version
                OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _sprue_rc)
if(NOT _sprue_rc EQUAL 0)
  set(Sprue_FOUND FALSE)
  set(Sprue_NOT_FOUND_MESSAGE "${SPRUE_EXECUTABLE} --version failed")
  return()
endif()
string(REGEX REPLACE "^sprue " "" Sprue_VERSION "${_sprue_version}")
set(Sprue_FOUND TRUE)

function(sprue_add_kernel target)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "" "SOURCE;NAME" "OPTIONS")
  if(NOT ARG_SOURCE)
    message(FATAL_ERROR "sprue_add_kernel(${target}): SOURCE is required")
  endif()
  get_filename_component(source "${ARG_SOURCE}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
  if(ARG_NAME)
    set(name "${ARG_NAME}")
  else()
    get_filename_component(name "${source}" NAME_WE)
    string(MAKE_C_IDENTIFIER "${name}" name)
  endif()
  set(out_dir "${CMAKE_CURRENT_BINARY_DIR}/sprue/${target}")
  set(library "${out_dir}/lib${name}.so")
  set(header "${out_dir}/${name}.h")
  # An imported target's include directory must exist when CMake generates the build.
  file(MAKE_DIRECTORY "${out_dir}")
  add_custom_command(
    OUTPUT "${library}" "${header}"
    COMMAND "${SPRUE_EXECUTABLE}" compile "${source}" -o "${out_dir}" --name "${name}" ${ARG_OPTIONS}
    DEPENDS "${source}"
    COMMENT "sprue: compiling ${ARG_SOURCE} -> lib${name}.so, ${name}.h"
    VERBATIM)
  add_custom_target(${target}_sprue_build DEPENDS "${library}" "${header}")
  add_library(${target} SHARED IMPORTED GLOBAL)
  # The library has no SONAME: link it as -l<name> so executables record `lib<name>.so`, not a path.
  set_target_properties(${target} PROPERTIES
    IMPORTED_LOCATION "${library}"
    IMPORTED_NO_SONAME TRUE
    INTERFACE_INCLUDE_DIRECTORIES "${out_dir}")
  add_dependencies(${target} ${target}_sprue_build)
endfunction()
