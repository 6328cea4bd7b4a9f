# Fails when a source file includes a header from a layer above its own (docs/architecture.md,
# "Layers"). Static libraries do not stop a header-only include from crossing a layer, so this
# check is what makes a wrong include fail: it runs at every configure (included from the top
# CMakeLists.txt) and as the CTest test `layering` (cmake -DMEMTRAIN_SOURCE_DIR=... -P).
#
# Each layer may include itself and the layers listed for it (written out transitively, so the
# table is the whole rule). tests/ and benchmarks/ may include anything.
#
# One rule more inside a layer's reach: models/ names no backend (design.md, "kernels/"). It
# calls the op API (kernels/ops, kernels/op_context.hpp, and the backend-neutral headers at the
# top of kernels/), which picks the CPU or the CUDA kernel; an include of kernels/cpu/ or
# kernels/cuda/ from models/ is refused like an upward one.
if(CMAKE_SCRIPT_MODE_FILE)
  cmake_minimum_required(VERSION 3.25)  # policies of the script mode (IN_LIST)
endif()
if(NOT DEFINED MEMTRAIN_SOURCE_DIR)
  set(MEMTRAIN_SOURCE_DIR ${PROJECT_SOURCE_DIR})
endif()

set(_below_memory "")
set(_below_kernels memory)
set(_below_runtime/core kernels memory)
set(_below_comms runtime/core kernels memory)
set(_below_models comms runtime/core kernels memory)
set(_below_runtime/data runtime/core kernels memory)
set(_below_runtime/config runtime/data models comms runtime/core kernels memory)
set(_below_runtime/checkpoint runtime/config runtime/data models comms runtime/core kernels memory)
set(_below_runtime/train runtime/checkpoint runtime/config runtime/data models comms runtime/core
    kernels memory)
set(_below_runtime/plan runtime/train runtime/checkpoint runtime/config runtime/data models comms
    runtime/core kernels memory)
set(_below_runtime/cli runtime/plan runtime/train runtime/checkpoint runtime/config runtime/data
    models comms runtime/core kernels memory)
set(_no_backend models)
set(_backend_folders "^kernels/(cpu|cuda)/")
set(_layers memory kernels runtime/core comms models runtime/data runtime/config
    runtime/checkpoint runtime/train runtime/plan runtime/cli)

# The layer a project path belongs to ("runtime/train/x.hpp" -> runtime/train, "kernels/cpu/x"
# -> kernels), or "" when it is not in a layer (a system or library header).
function(_memtrain_layer_of path out)
  set(layer "")
  if(path MATCHES "^runtime/([a-z_]+)/")
    set(layer "runtime/${CMAKE_MATCH_1}")
  elseif(path MATCHES "^([a-z_]+)/")
    set(layer "${CMAKE_MATCH_1}")
  endif()
  if(NOT layer IN_LIST _layers)
    set(layer "")
  endif()
  set(${out} "${layer}" PARENT_SCOPE)
endfunction()

set(_violations "")
foreach(layer IN LISTS _layers)
  file(GLOB_RECURSE _files LIST_DIRECTORIES false
       ${MEMTRAIN_SOURCE_DIR}/${layer}/*.cpp ${MEMTRAIN_SOURCE_DIR}/${layer}/*.hpp
       ${MEMTRAIN_SOURCE_DIR}/${layer}/*.h ${MEMTRAIN_SOURCE_DIR}/${layer}/*.cu
       ${MEMTRAIN_SOURCE_DIR}/${layer}/*.cuh)
  foreach(f IN LISTS _files)
    # Both "..." and <...> includes: a project header reached as <models/x.hpp> or through
    # "../../models/x.hpp" is still a project header. A relative path is resolved against the
    # including file's folder first (as the preprocessor does for "..."), then the source root.
    file(STRINGS ${f} _includes REGEX "^[ \t]*#[ \t]*include[ \t]*[\"<]")
    get_filename_component(_dir ${f} DIRECTORY)
    foreach(line IN LISTS _includes)
      string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*[\"<]([^\">]+)[\">].*" "\\1" inc "${line}")
      set(_path "${inc}")
      if(EXISTS ${_dir}/${inc} AND NOT EXISTS ${MEMTRAIN_SOURCE_DIR}/${inc})
        get_filename_component(_abs ${_dir}/${inc} ABSOLUTE)
        file(RELATIVE_PATH _path ${MEMTRAIN_SOURCE_DIR} ${_abs})
      endif()
      if(layer IN_LIST _no_backend AND _path MATCHES "${_backend_folders}")
        file(RELATIVE_PATH rel ${MEMTRAIN_SOURCE_DIR} ${f})
        string(APPEND _violations "\n  ${rel}: #include \"${inc}\" (${layer} names no backend: call the op API in kernels/ops)")
        continue()
      endif()
      _memtrain_layer_of("${_path}" target_layer)
      if(target_layer STREQUAL "" OR target_layer STREQUAL layer)
        continue()
      endif()
      if(NOT target_layer IN_LIST _below_${layer})
        file(RELATIVE_PATH rel ${MEMTRAIN_SOURCE_DIR} ${f})
        string(APPEND _violations "\n  ${rel}: #include \"${inc}\" (${layer} may include only: ${_below_${layer}})")
      endif()
    endforeach()
  endforeach()
endforeach()
if(_violations)
  message(FATAL_ERROR "memtrain: includes that run against the layers (docs/architecture.md):${_violations}")
endif()
