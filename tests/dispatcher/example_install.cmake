# The dispatch example (examples/dispatch) built against an installed mactune: cmake --install
# into a fresh prefix, configure and build the example as a separate project with
# find_package(mactune), and run it on the sample table, on a table of this machine and on a
# table of another machine (refused with one warning line, fallback).
#   cmake -DBUILD_DIR=... -DSOURCE_DIR=... -DWORK=... -DMAKE_TABLE=... -DCXX=... [-DCUDA_ROOT=...]
#         [-DCXX_FLAGS=... -DLINKER_FLAGS=...] -P example_install.cmake
cmake_minimum_required(VERSION 3.25)

function(run)
  cmake_parse_arguments(R "" "OUT;ERR;RESULT" "COMMAND" ${ARGN})
  execute_process(COMMAND ${R_COMMAND} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(R_RESULT)
    set(${R_RESULT} ${rc} PARENT_SCOPE)
  elseif(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${R_COMMAND}\n${out}\n${err}")
  endif()
  if(R_OUT)
    set(${R_OUT} "${out}" PARENT_SCOPE)
  endif()
  if(R_ERR)
    set(${R_ERR} "${err}" PARENT_SCOPE)
  endif()
endfunction()

function(expect text regex what)
  if(NOT text MATCHES "${regex}")
    message(FATAL_ERROR "expected ${what} (/${regex}/) in:\n${text}")
  endif()
endfunction()

function(count_matches text regex n)
  string(REGEX MATCHALL "${regex}" all "${text}")
  list(LENGTH all got)
  if(NOT got EQUAL n)
    message(FATAL_ERROR "expected ${n} matches of /${regex}/, got ${got} in:\n${text}")
  endif()
endfunction()

file(REMOVE_RECURSE ${WORK})
run(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK}/prefix OUT ignored)
set(cuda_args "")
if(CUDA_ROOT)
  set(cuda_args -DCUDAToolkit_ROOT=${CUDA_ROOT})
endif()
run(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples/dispatch -B ${WORK}/build -G Ninja
            -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=${CXX}
            -DCMAKE_PREFIX_PATH=${WORK}/prefix ${cuda_args} "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}"
            "-DCMAKE_EXE_LINKER_FLAGS=${LINKER_FLAGS}" OUT ignored)
run(COMMAND ${CMAKE_COMMAND} --build ${WORK}/build OUT ignored)
set(example ${WORK}/build/dispatch_example)

# 0. It links the dispatch library and no kernel code: neither compiled engine is on its link
# line, and no engine symbol is in the binary.
run(COMMAND ninja -C ${WORK}/build -t commands dispatch_example OUT link)
expect("${link}" "libmactune_dispatch\\.a" "the dispatch library on the link line")
if(link MATCHES "libmactune_kernels_(cpu|cuda)")
  message(FATAL_ERROR "the example links a kernel library:\n${link}")
endif()
run(COMMAND nm -C ${example} OUT symbols)
if(symbols MATCHES "mactune::(cpu|cuda)::Session::")
  message(FATAL_ERROR "the example holds engine code")
endif()

# 1. No argument: the sample table it ships, device check skipped; 19 answers.
run(COMMAND ${example} OUT out)
expect("${out}" "no table given: reading the sample table" "the sample-table note")
count_matches("${out}" "hit 0\\.[59]0 -> (full|mac|none)" 19)
message(STATUS "sample table:\n${out}")

# 2. A table of another machine, device check on: refused with exactly one warning line.
run(COMMAND ${example} ${SOURCE_DIR}/examples/dispatch/sample_table.json OUT out ERR err)
count_matches("${err}" "mactune: warning: " 1)
expect("${err}" "refused: made on another device: 'Example CPU" "the device refusal")
expect("${out}" "refused, every choice below is the fallback" "the refusal note")
count_matches("${out}" "\\(fallback\\)|none \\(" 19)

# 3. A table of this machine: accepted, table answers, MAC where the break-even allows.
run(COMMAND ${MAKE_TABLE} ${WORK}/this_machine.json RESULT rc)
if(rc EQUAL 77)
  message(STATUS "SKIPPED: this build has no CPU kernel registry, so no table of this machine")
  return()
elseif(NOT rc EQUAL 0)
  message(FATAL_ERROR "make_device_table failed (${rc})")
endif()
run(COMMAND ${example} ${WORK}/this_machine.json OUT out ERR err)
if(NOT err STREQUAL "")
  message(FATAL_ERROR "unexpected warnings:\n${err}")
endif()
expect("${out}" "this_machine.json: 3 entries for cpu" "the accepted table")
expect("${out}" "batch  1 context 131072 hit 0\\.90 -> mac mac_cpu_[a-z0-9]+_hd128_bf16 K=512 r=256 tau=0\\.45 chunk_tokens=256 \\(table entry 1, break-even 0\\.85\\)" "MAC above the break-even")
expect("${out}" "batch  1 context 131072 hit 0\\.50 -> full full_cpu_[a-z0-9]+_hd128_bf16 chunk_tokens=256 \\(table entry 1, break-even 0\\.85\\)" "full below the break-even")
expect("${out}" "batch 32 context   8192 hit 0\\.90 -> mac .*\\(table entry 2, break-even 0\\.6\\)" "the open-ended bucket")
expect("${out}" "head_dim 64 f32, batch 1 context 4096 hit 0\\.90 -> full full_cpu_[a-z0-9]+_hd64_f32 \\(fallback\\)" "the fallback for a shape outside the table")
message(STATUS "table of this machine:\n${out}")
