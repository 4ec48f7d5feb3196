# The instance grid of kernels/cuda/instances.txt turned into generated sources (included by
# kernels/cuda/CMakeLists.txt and, for the host build of the same kernels, by
# kernels/cuda/simt/CMakeLists.txt). Sets _names (canonical names of the kept instances) and
# _sources (their generated translation units) and writes, under ${PROJECT_BINARY_DIR}/generated:
#   kernels/cuda/instances/<name>.cu, instances.h, registry_table.cpp, instance_grid.h
#
# Which instances exist, their names and which configs fit the shared memory of a CTA are the
# C++ side's (config.h: the name grammar; launch.h: attend_smem_bytes and kMaxSmemPerCta): the
# grid generator (tools/instance_grid.cpp over grid.h) reads instances.txt and prints
# "FAMILY NAME CONFIG" lines; this file only turns them into sources.
set(_grid_file ${CMAKE_CURRENT_LIST_DIR}/instances.txt)
set(_gen ${PROJECT_BINARY_DIR}/generated)
set(_gen_cuda ${_gen}/kernels/cuda)
file(MAKE_DIRECTORY ${_gen_cuda}/instances ${_gen}/tools)

# ---- The grid generator, compiled with the host compiler when it or a header it includes
# (its depfile) is newer than the binary; configure runs again when any of them changes.
set(_grid_tool ${_gen}/tools/instance_grid)
set(_grid_depfile ${_gen}/tools/instance_grid.d)
set(_grid_tool_src ${CMAKE_CURRENT_LIST_DIR}/tools/instance_grid.cpp)
# The files of a make-style depfile ("target: dep dep \<newline> dep ...").
function(_mactune_depfile_files depfile out)
  file(READ ${depfile} _text)
  string(REGEX REPLACE "^[^:]*:" "" _text "${_text}")
  string(REPLACE "\\\n" " " _text "${_text}")
  string(REGEX MATCHALL "[^ \t\r\n]+" _files "${_text}")
  set(${out} ${_files} PARENT_SCOPE)
endfunction()
set(_grid_deps ${_grid_tool_src})
if(EXISTS ${_grid_depfile})
  _mactune_depfile_files(${_grid_depfile} _grid_deps)
endif()
set(_grid_stale FALSE)
foreach(_dep IN LISTS _grid_deps)
  if(NOT EXISTS ${_grid_tool} OR NOT EXISTS ${_dep} OR ${_dep} IS_NEWER_THAN ${_grid_tool})
    set(_grid_stale TRUE)
  endif()
endforeach()
if(_grid_stale)
  execute_process(
    COMMAND ${CMAKE_CXX_COMPILER} -std=c++20 -O0 -I${PROJECT_SOURCE_DIR} -MMD -MF ${_grid_depfile}
            ${_grid_tool_src} -o ${_grid_tool}
    RESULT_VARIABLE _rc ERROR_VARIABLE _err OUTPUT_VARIABLE _out)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "mactune: the CUDA grid generator (${_grid_tool_src}) does not compile:\n${_out}${_err}")
  endif()
  _mactune_depfile_files(${_grid_depfile} _grid_deps)
endif()
set_property(DIRECTORY ${PROJECT_SOURCE_DIR} APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
             ${_grid_file} ${_grid_deps})

if(MACTUNE_ALL_INSTANCES)
  set(_grid_mode all)
else()
  set(_grid_mode default)
endif()
execute_process(COMMAND ${_grid_tool} ${_grid_file} ${_grid_mode}
                RESULT_VARIABLE _rc OUTPUT_VARIABLE _grid_lines ERROR_VARIABLE _err)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "mactune: the CUDA instance grid: ${_err}")
endif()

# ---- The filter: globs of [A-Za-z0-9_*?] -> one anchored regex.
set(_filter_rx "")
foreach(_glob IN LISTS MACTUNE_KERNEL_FILTER)
  if(NOT _glob MATCHES "^[A-Za-z0-9_*?]+$")
    message(FATAL_ERROR "MACTUNE_KERNEL_FILTER: '${_glob}' is not a glob over instance names "
                        "(letters, digits, _, * and ? only)")
  endif()
  string(REPLACE "*" ".*" _rx "${_glob}")
  string(REPLACE "?" "." _rx "${_rx}")
  list(APPEND _filter_rx "^${_rx}$")
endforeach()
list(JOIN _filter_rx "|" _filter_rx)
function(_mactune_keep name out)
  if(_filter_rx STREQUAL "" OR name MATCHES "${_filter_rx}")
    set(${out} TRUE PARENT_SCOPE)
  else()
    set(${out} FALSE PARENT_SCOPE)
  endif()
endfunction()

# ---- Generation: one TU, one extern block and one registry entry per kept instance. A tag's
# config is parsed from its name at compile time (config.h), so no field is spelt here.
set(_sources "")
set(_names "")
set(MACTUNE_EXTERN_TEMPLATES "")
set(MACTUNE_INSTANCE_TAGS "")
foreach(_family attend full match merge)
  string(TOUPPER ${_family} _FAMILY)
  set(MACTUNE_${_FAMILY}_ENTRIES "")
  set(MACTUNE_${_FAMILY}_GRID "")
endforeach()
string(REPLACE "\n" ";" _grid_lines "${_grid_lines}")
foreach(_line IN LISTS _grid_lines)
  if(_line STREQUAL "")
    continue()
  endif()
  string(REPLACE " " ";" _f "${_line}")
  list(GET _f 0 _family)
  list(GET _f 1 _name)
  list(GET _f 2 _config)
  _mactune_keep(${_name} _keep)
  if(NOT _keep)
    continue()
  endif()
  string(TOUPPER ${_family} _FAMILY)
  set(_tag "instance::${_name}")
  # The launcher header of the family (detail/launch_<family>.cuh; full's kernels are attend's).
  set(MACTUNE_INSTANCE_LAUNCHER launch_${_family}.cuh)
  if(_family STREQUAL "attend")
    set(_type AttendConfig)
    set(_decls "cudaError_t launch_attend<${_tag}>(const AttendParams&, int, cudaStream_t)"
               "cudaError_t attend_ctas_per_sm<${_tag}>(int&)")
    set(_row "{describe(${_tag}::config), ${_tag}::config, &launch_attend<${_tag}>, &attend_ctas_per_sm<${_tag}>}")
  elseif(_family STREQUAL "full")
    set(MACTUNE_INSTANCE_LAUNCHER launch_attend.cuh)
    set(_type FullConfig)
    set(_decls "cudaError_t launch_full<${_tag}>(const AttendParams&, int, cudaStream_t)"
               "cudaError_t full_ctas_per_sm<${_tag}>(int&)")
    set(_row "{describe(${_tag}::config), ${_tag}::config, &launch_full<${_tag}>, &full_ctas_per_sm<${_tag}>}")
  elseif(_family STREQUAL "match")
    set(_type MatchConfig)
    set(_decls "cudaError_t launch_match<${_tag}>(const MatchParams&, cudaStream_t)"
               "cudaError_t match_ctas_per_sm<${_tag}>(int&)")
    set(_row "{describe(${_tag}::config), ${_tag}::config, &launch_match<${_tag}>, &match_ctas_per_sm<${_tag}>}")
  else()
    set(_type MergeConfig)
    set(_decls "cudaError_t launch_merge<${_tag}>(const MergeParams&, cudaStream_t)")
    set(_row "{describe(${_tag}::config), ${_tag}::config, &launch_merge<${_tag}>}")
  endif()
  list(APPEND _names ${_name})
  # One explicit instantiation per declaration here, one `extern template` in instances.h.
  set(MACTUNE_INSTANCE_DEFS "")
  foreach(_decl IN LISTS _decls)
    string(APPEND MACTUNE_INSTANCE_DEFS "template ${_decl};\n")
    string(APPEND MACTUNE_EXTERN_TEMPLATES "extern template ${_decl};\n")
  endforeach()
  string(APPEND MACTUNE_${_FAMILY}_ENTRIES "      ${_row},\n")
  string(APPEND MACTUNE_${_FAMILY}_GRID "      \"${_name}\",\n")
  string(APPEND MACTUNE_INSTANCE_TAGS
         "struct ${_name} {\n  static constexpr ${_type} config = parse_${_family}_name(\"${_name}\").value();\n};\n")
  set(MACTUNE_INSTANCE_NAME ${_name})
  set(MACTUNE_INSTANCE_CONFIG ${_config})
  configure_file(${CMAKE_CURRENT_LIST_DIR}/templates/instance.cu.in ${_gen_cuda}/instances/${_name}.cu @ONLY)
  list(APPEND _sources ${_gen_cuda}/instances/${_name}.cu)
endforeach()
if(MACTUNE_ALL_INSTANCES)
  set(MACTUNE_ALL_INSTANCES_BOOL true)
else()
  set(MACTUNE_ALL_INSTANCES_BOOL false)
endif()
configure_file(${CMAKE_CURRENT_LIST_DIR}/templates/instances.h.in ${_gen_cuda}/instances.h @ONLY)
configure_file(${CMAKE_CURRENT_LIST_DIR}/templates/registry_table.cpp.in ${_gen_cuda}/registry_table.cpp @ONLY)
configure_file(${CMAKE_CURRENT_LIST_DIR}/templates/instance_grid.h.in ${_gen_cuda}/instance_grid.h @ONLY)
list(LENGTH _names _count)
message(STATUS "mactune: ${_count} CUDA instances (MACTUNE_ALL_INSTANCES=${MACTUNE_ALL_INSTANCES}, "
               "MACTUNE_KERNEL_FILTER='${MACTUNE_KERNEL_FILTER}')")

